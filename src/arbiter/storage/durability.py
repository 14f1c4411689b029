"""Group commit for SQLite: many commits made durable by one fsync.

SQLite connections run with `synchronous=NORMAL`: a commit returns once its WAL
frames are written to the operating system, so it already survives the process
being killed, and SQLite syncs the WAL itself before each checkpoint. The one
sync NORMAL leaves out, the one that makes a commit survive a power cut, is
done here: each commit takes a ticket, and before anyone is told it is saved
the writer waits until an fdatasync of the WAL that began after its commit has
finished. One sync serves every commit made before it began (group commit).

The wait happens outside the SQLite writer lock, so the next writer does not
wait for the disk. Code that commits while holding a lock of its own (a run's,
the scheduler's) opens `deferred()` around that lock: commits inside only take
their tickets, and the outermost block waits for them after the locks are
released. Nothing is answered before that wait returns, so the guarantee a
caller sees is the same as with `synchronous=FULL`. A thread that serves
batches of callers goes one step further with `postponed()`: it hands the wait,
with the callers' answers, to another thread, and serves its next batch while
the disk syncs this one.

All of it runs in the threadpool (it blocks on the disk).
"""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class WalSync:
    """The fsyncs of one SQLite database's write-ahead log, shared by its writers."""

    def __init__(self, database: Path) -> None:
        self._wal = Path(f"{database}-wal")
        self._directory = database.parent
        self._sync_lock = threading.Lock()  # one fsync at a time; others wait, then check
        self._committed = 0  # tickets handed out; written under the engine's writer lock
        self._synced = 0  # every ticket up to this one is durable (read as `synced`)
        self._wal_inode: int | None = None
        self.syncs = 0  # how many fsyncs ran (tests and benchmarks read it)

    @property
    def committed(self) -> int:
        """The ticket of the latest commit (tests wait on it: a commit is visible to
        readers a moment before its writer takes the ticket)."""
        return self._committed

    @property
    def synced(self) -> int:
        """Every commit whose ticket is at most this is durable."""
        return self._synced

    def ticket(self) -> int:
        """The ticket of a commit that has just returned (caller holds the writer lock)."""
        self._committed += 1
        return self._committed

    def wait(self, ticket: int) -> None:
        """Return once the commit with this ticket is durable."""
        if self._synced >= ticket:
            return
        with self._sync_lock:
            if self._synced >= ticket:  # a sync that ran while we queued covered us
                return
            covered = self._committed  # all of these commits are in the WAL already
            self._sync_wal()
            self._synced = covered

    def _sync_wal(self) -> None:
        try:
            descriptor = os.open(self._wal, os.O_RDONLY)
        except FileNotFoundError:
            return  # the last connection checkpointed and removed it (the database synced)
        try:
            os.fdatasync(descriptor)
            inode = os.fstat(descriptor).st_ino
        finally:
            os.close(descriptor)
        self.syncs += 1
        if inode != self._wal_inode:  # a new WAL file: its directory entry must last too
            self._sync_directory()
            self._wal_inode = inode

    def _sync_directory(self) -> None:
        descriptor = os.open(self._directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


_local = threading.local()


@contextmanager
def deferred() -> Iterator[None]:
    """Commits inside this block (on this thread) are made durable when it exits.

    Nested blocks defer to the outermost one. The wait happens on the way out
    whatever happened inside: what was committed must be durable before the
    caller answers, even with an error."""
    if getattr(_local, "pending", None) is not None:
        yield
        return
    _local.pending = {}
    try:
        yield
    finally:
        pending: dict[WalSync, int] = _local.pending
        _local.pending = None
        for sync, ticket in pending.items():
            sync.wait(ticket)


class Durability:
    """What commits of a `postponed()` block still need: `wait()` makes them durable,
    from any thread. Empty on PostgreSQL, whose commits are durable on return."""

    def __init__(self) -> None:
        self._tickets: dict[WalSync, int] = {}

    @property
    def pending(self) -> bool:
        """Whether some commit of the block may not be durable yet."""
        return any(sync.synced < ticket for sync, ticket in self._tickets.items())

    def wait(self) -> None:
        """Return once every commit of the block is durable."""
        for sync, ticket in self._tickets.items():
            sync.wait(ticket)


@contextmanager
def postponed() -> Iterator[Durability]:
    """Like `deferred()`, except that nobody waits on the way out: the block's
    commits return once SQLite has them, and whoever answers for them calls the
    yielded `Durability.wait()` first (a batch thread hands it to another thread
    and goes on with its next batch). Not nested in `deferred()` or itself."""
    if getattr(_local, "pending", None) is not None:
        raise RuntimeError("postponed() inside a deferred() or postponed() block")
    durability = Durability()
    _local.pending = durability._tickets
    try:
        yield durability
    finally:
        _local.pending = None


def settle(sync: WalSync, ticket: int) -> None:
    """After a commit: wait for its sync now, or leave it to the enclosing `deferred`."""
    pending: dict[WalSync, int] | None = getattr(_local, "pending", None)
    if pending is None:
        sync.wait(ticket)
    else:
        pending[sync] = max(pending.get(sync, 0), ticket)
