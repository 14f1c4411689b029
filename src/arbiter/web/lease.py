"""Keeping the primary's lease (storage/lease.py) while the process serves.

`serve` takes the lease before it migrates anything; the lifespan then hands it
to a `LeaseKeeper`, whose thread (`arbiter-lease`, never the request
threadpool) checks it every few seconds. While the lease is lost the worker API
answers JSON 503 (`RejectNonPrimaryWorkerApiMiddleware`) and the jobs skip
their runs, so nothing this process holds in memory reaches storage; the keeper
takes the lease again as soon as it is free.

Taking it again is only safe if no other primary served in between: that one
has handed out tasks this process's memory knows nothing of. Each primary
writes a token of its own to the kv table once it holds the lease; a keeper
that gets the lease back and finds another token there gives it up for good
and logs that the process must be restarted.
"""

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from arbiter.jobs import Job
from arbiter.runtime.state import AppState
from arbiter.storage import Storage, StorageError
from arbiter.storage.lease import PrimaryLease

log = logging.getLogger("arbiter.lease")

MARKER_KEY = "primary_lease"
THREAD_NAME = "arbiter-lease"


class LeaseKeeper:
    """`serving` is read on the event loop (a plain bool); everything else runs
    in the keeper's thread, or in the threadpool at start and stop."""

    def __init__(self, lease: PrimaryLease, period: float) -> None:
        self.lease = lease
        self.period = period
        self.serving = True
        self.token = secrets.token_hex(16)
        self._storage: Storage | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, storage: Storage) -> None:
        """Mark the database as ours and start checking. Blocking (threadpool)."""
        self._storage = storage
        with storage.write() as tx:
            tx.kv.set(MARKER_KEY, {"token": self.token, "since": time.time()})
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop checking and give the lease back. Blocking (threadpool)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.lease.release()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                if not self.check_once():
                    return
            except Exception:  # a bug here must not end the checks silently
                log.exception("checking the primary lease failed")

    def check_once(self) -> bool:
        """One check; False once the keeper has given up for good."""
        intact = self.lease.check()
        if intact and self.serving:
            return True
        if not intact:
            if self.serving:
                self.serving = False
                log.error(
                    "primary lease lost (database session ended or lock file replaced): "
                    "the worker API answers 503 until the lease is taken again"
                )
            if not self._try_acquire():
                return True
        marker = self._marker()
        if marker is None:
            return True  # the database cannot say yet: ask again next time
        if marker != self.token:
            self.lease.release()
            log.error(
                "primary lease taken again, but another primary served this database "
                "meanwhile: this process's run state is stale and it stays off the "
                "worker API; restart it"
            )
            return False
        self.serving = True
        log.warning("primary lease taken again: serving the worker API")
        return True

    def _try_acquire(self) -> bool:
        try:
            return self.lease.try_acquire()
        except StorageError:  # the database is still away
            return False

    def _marker(self) -> str | None:
        assert self._storage is not None
        try:
            with self._storage.read() as tx:
                marker = tx.kv.get(MARKER_KEY)
        except StorageError:
            return None
        token = marker.get("token") if isinstance(marker, dict) else None
        return str(token) if token is not None else ""


def paused_without_lease(
    table: Callable[[AppState], Sequence[Job]], keeper: LeaseKeeper
) -> Callable[[AppState], list[Job]]:
    """`table`'s jobs, each skipping its runs while the keeper has no lease: a
    primary that may no longer be the only one must not write its stale state."""

    def guarded_table(state: AppState) -> list[Job]:
        return [replace(job, function=_while_serving(keeper, job)) for job in table(state)]

    return guarded_table


def _while_serving(keeper: LeaseKeeper, job: Job) -> Callable[[], object]:
    def run() -> object:
        if not keeper.serving:
            log.info("job %s skipped: the primary lease is lost", job.name)
            return None
        return job.function()

    return run
