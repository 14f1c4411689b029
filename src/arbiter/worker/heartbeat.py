"""The heartbeat thread: after HEARTBEAT_SILENCE seconds without a reply from
the server, a `beat` renews the current task's lease (reference 2.3). A beat
that says the task is gone ends the task. Runs in its own daemon thread; it
only reads the client's contact clock and sets Control flags.
"""

import logging
import threading
import time
from collections.abc import Callable

from arbiter.worker.client import ApiClient
from arbiter.worker.control import Control
from arbiter.worker.errors import WorkerError

log = logging.getLogger("arbiter.worker.heartbeat")

HEARTBEAT_SILENCE = 120.0  # s without contact before a beat
TICK = 1.0  # s between looks
RETRY_AFTER = 15.0  # s between beats while the server does not answer


class Heartbeat:
    def __init__(
        self,
        client: ApiClient,
        control: Control,
        *,
        silence: float = HEARTBEAT_SILENCE,
        tick: float = TICK,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.control = control
        self.silence = silence
        self.tick = tick
        self.clock = clock
        self._halt = threading.Event()
        self._last_try = -float("inf")
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while not self._halt.wait(self.tick):
            self.check()

    def check(self) -> None:
        """One look: beat if the server has not heard from us for too long."""
        current = self.control.current
        now = self.clock()
        if current is None or now - self.client.last_contact < self.silence:
            return
        if now - self._last_try < RETRY_AFTER:
            return
        self._last_try = now
        try:
            alive = self.client.beat(*current)
        except WorkerError as error:
            log.warning("beat failed: %s", error)
            return
        if not alive and self.control.abort_task(*current):
            log.warning("the server no longer has task %s/%d: stopping it", *current)
