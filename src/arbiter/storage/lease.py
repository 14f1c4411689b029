"""The primary's lease: at most one primary process per database.

The primary keeps the live run state in memory and decides alone which worker
gets which task; two primaries on one database hand out the same task ids and
each believes its own totals. So the primary holds an exclusive lease for its
whole life, and a second one is refused before it migrates or touches anything:

- PostgreSQL: a session-level advisory lock (`pg_try_advisory_lock`) on a
  connection of its own, outside the engine's pool. The lock lives exactly as
  long as that session, so a primary that dies, or whose connection is killed,
  loses it; `check()` notices a dead session, `try_acquire()` takes the lock
  again when it is free.
- SQLite: an exclusive `flock` on a file beside the database. The kernel drops
  it with the process. `check()` notices the file being deleted or replaced
  (another process could then lock the new one); `try_acquire()` locks the
  file that is there now.

Every method blocks: callers run them at start-up, before the event loop, or
in the lease thread (`web/lease.py`), never on the event loop.
"""

import fcntl
import os
import socket
from pathlib import Path
from typing import Protocol

from arbiter.storage.engine import supported_url
from arbiter.storage.errors import DatabaseNotOpened, LeaseHeld

# The advisory lock's key ("ARBI"): advisory locks are per database, so two
# Arbiter databases on one PostgreSQL server never share it.
ADVISORY_LOCK_KEY = 0x41524249
LOCK_FILE_SUFFIX = ".primary.lock"
REFUSAL = "start this one with --role secondary, or stop the other first"


class PrimaryLease(Protocol):
    @property
    def held(self) -> bool: ...

    def acquire(self) -> None:
        """Take the lease or raise LeaseHeld (DatabaseNotOpened: no database)."""
        ...

    def try_acquire(self) -> bool:
        """Take the lease if it is free (DatabaseNotOpened: no database)."""
        ...

    def check(self) -> bool:
        """Is the lease held and intact? A lost one is let go."""
        ...

    def release(self) -> None: ...

    def evict_holder(self) -> int:
        """End the sessions of the process holding the lease (PostgreSQL: a
        frozen primary's, for a standby); how many. Elsewhere 0."""
        ...


def primary_lease(database_url: str) -> PrimaryLease:
    """The lease for the database at `database_url` (DatabaseNotOpened: a URL we
    do not support)."""
    url = supported_url(database_url)
    if url.get_backend_name() == "postgresql":
        from arbiter.storage.lease_postgresql import AdvisoryLockLease  # imports psycopg

        return AdvisoryLockLease(url)
    if not url.database or url.database == ":memory:":
        return NoLease()  # no other process can open an in-memory database
    database = Path(url.database).resolve()
    return LockFileLease(database.with_name(database.name + LOCK_FILE_SUFFIX))


def holder_name() -> str:
    """How a lease names its holder to a refused primary."""
    return f"arbiter primary on {socket.gethostname()} (pid {os.getpid()})"


class NoLease:
    """An in-memory database: this process is the only one that can open it."""

    held = True

    def acquire(self) -> None:
        return None

    def try_acquire(self) -> bool:
        return True

    def check(self) -> bool:
        return True

    def release(self) -> None:
        return None

    def evict_holder(self) -> int:
        return 0


class LockFileLease:
    """An exclusive flock on `path`; the file keeps the holder's name for the
    refusal message of the next one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if not self._try_lock():
            raise LeaseHeld(
                f"another primary holds this database ({self._holder()}; lock file "
                f"{self.path}): {REFUSAL}"
            )

    def try_acquire(self) -> bool:
        return self.held or self._try_lock()

    def check(self) -> bool:
        if self._fd is not None and self._still_our_file(self._fd):
            return True
        self._close()
        return False

    def release(self) -> None:
        self._close()

    def evict_holder(self) -> int:
        return 0  # the kernel holds the lock for a live process, frozen or not

    def _try_lock(self) -> bool:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise DatabaseNotOpened(
                f"cannot open the lock file {self.path}: {error.strerror}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, holder_name().encode())
        self._fd = fd
        return True

    def _still_our_file(self, fd: int) -> bool:
        try:
            on_disk = self.path.stat()
        except FileNotFoundError:
            return False
        ours = os.fstat(fd)
        return (on_disk.st_dev, on_disk.st_ino) == (ours.st_dev, ours.st_ino)

    def _holder(self) -> str:
        try:
            return self.path.read_text().strip() or "holder unknown"
        except OSError:
            return "holder unknown"

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None
