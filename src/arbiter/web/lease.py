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
from arbiter.storage.lease_fence import MARKER_KEY, LeaseFence, marker_token

log = logging.getLogger("arbiter.lease")

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
        self._since = 0.0
        self._beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self, storage: Storage) -> None:
        """Mark the database as ours, before the live runs are loaded, and on
        PostgreSQL fence every later write with that mark (storage/lease_fence.py).
        Blocking (threadpool)."""
        self._storage = storage
        self._since = time.time()
        with storage.write() as tx:
            tx.kv.set(MARKER_KEY, self._marker())
        if storage.engine.dialect.name == "postgresql":
            storage.fence = LeaseFence(self.token)

    def start(self, storage: Storage) -> None:
        """Claim the database (unless done) and start checking. Blocking (threadpool)."""
        if self._storage is None:
            self.claim(storage)
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def _marker(self) -> dict[str, object]:
        """The mark: this primary's token, and a beat a standby watches for change."""
        return {"token": self.token, "since": self._since, "beat": self._beats}

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
            self._beat()
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
        marker = self._stored_token()
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

    def _beat(self) -> None:
        """Tell a standby this primary is alive (on PostgreSQL, where one can wait):
        it takes over a primary whose beat stops (web/standby.py)."""
        assert self._storage is not None
        if self._storage.engine.dialect.name != "postgresql":
            return
        self._beats += 1
        try:
            with self._storage.write() as tx:
                tx.kv.set(MARKER_KEY, self._marker())
        except StorageError:
            pass  # the database is away, or another primary took over: the next check says

    def _try_acquire(self) -> bool:
        try:
            return self.lease.try_acquire()
        except StorageError:  # the database is still away
            return False

    def confirmed(self) -> bool:
        """Whether the database's mark names this primary now. Blocking (threadpool)."""
        return self._storage is None or self._stored_token() == self.token

    def _stored_token(self) -> str | None:
        """The token in the database's mark; None when the database cannot say."""
        assert self._storage is not None
        try:
            with self._storage.read() as tx:
                marker = tx.kv.get(MARKER_KEY)
        except StorageError:
            return None
        return marker_token(marker) or ""


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
