"""Overload: when the core cannot keep up, worker calls are turned away at once.

A saturated server that serves every call in turn makes every caller wait for
the whole queue: measured, replies took seconds, then timed out or were reset,
for every endpoint. The event loop's lag says when that starts: a timer due
every LAG_PERIOD that runs the limit late (ARBITER_OVERLOAD_LAG_MS, half a
second) means the ready queue holds that much work. While it does (and for
SHED_HOLD after, so that the queue drains), worker calls are answered before
their body is read: a request_task gets the reference's "too busy" reply,
which the worker retries later, and beats, updates, version checks and task
closings a temporary 503 with Retry-After, which every worker retries (the
official one too: web/replies.py). request_spsa and upload_pgn are served
all the same: the official worker never retries them (a refused request_spsa
ends its task, a refused upload loses the task's PGN), and each is one call
per batch or per task. Pages and the API for people are served as usual. A
limit of 0 never sheds: for an app whose loop shares its process with other
work (the tests').

Everything here runs on the event loop. [LOOP]
"""

import asyncio
import contextlib
import time
from collections.abc import Callable

from starlette.types import Scope, Send

from arbiter.domain.runs.scheduler import too_busy
from arbiter.runtime.settings import OVERLOAD_LAG_MS
from arbiter.telemetry import SHED_TOO_BUSY, SHED_UNAVAILABLE
from arbiter.web.middleware import request_started_at, send_body, send_error
from arbiter.web.replies import json_body

LAG_PERIOD = 0.1  # s between the lag monitor's timers (a fifth of the limit: 10 wake-ups a second)
LAG_LIMIT = OVERLOAD_LAG_MS / 1000  # s late, by default: the loop has that much work queued
SHED_HOLD = 1.0  # s of shedding after the lag was last over the limit
SHED_MESSAGE = "server overloaded, retry shortly"
# Calls served even while shedding: refused, the official worker would not retry them.
NEVER_SHED = frozenset({"/api/request_spsa", "/api/upload_pgn"})


class LoopLag:
    """The event loop's lateness, measured by a timer of its own. Lagging more
    than `limit` seconds starts the shedding; a limit of 0 never does (an app
    whose loop shares its process with other work, such as a test's)."""

    def __init__(
        self, limit: float = LAG_LIMIT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self._clock = clock
        self._lagging_until = 0.0
        self.worst = 0.0  # s: the largest lag seen (monitoring)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def shedding(self) -> bool:
        return self._clock() < self._lagging_until

    def observe(self, lag: float) -> None:
        """One timer's lateness (the monitor, and tests)."""
        self.worst = max(self.worst, lag)
        if self.limit and lag > self.limit:
            self._lagging_until = self._clock() + SHED_HOLD

    async def _watch(self) -> None:
        while True:
            due = self._clock() + LAG_PERIOD
            await asyncio.sleep(LAG_PERIOD)
            self.observe(self._clock() - due)


def sheds(path: str) -> bool:
    """Whether a worker call to `path` is turned away while the loop lags."""
    return path not in NEVER_SHED


async def send_shed_reply(scope: Scope, send: Send) -> None:
    """Turn a worker call away at once: request_task gets the reference's "too
    busy", every other call a temporary 503 with Retry-After (`send_error`)."""
    if scope["path"] == "/api/request_task":
        SHED_TOO_BUSY.inc()
        body = json_body(too_busy(), request_started_at(scope))
        await send_body(send, 200, b"application/json", body)
        return
    SHED_UNAVAILABLE.inc()
    await send_error(scope, send, 503, SHED_MESSAGE)
