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

import contextlib
import fcntl
import os
import socket
from pathlib import Path
from typing import Protocol

import psycopg
from sqlalchemy.engine import URL

from arbiter.storage.engine import describe_url, one_line, supported_url
from arbiter.storage.errors import DatabaseNotOpened, LeaseHeld

# The advisory lock's key ("ARBI"): advisory locks are per database, so two
# Arbiter databases on one PostgreSQL server never share it.
ADVISORY_LOCK_KEY = 0x41524249
LOCK_FILE_SUFFIX = ".primary.lock"
# TCP keepalives on the lease connection, so a silent network loses the lease in
# about half a minute rather than in the kernel's two hours.
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
_CONNECT_TIMEOUT_SECONDS = 10

_REFUSAL = "start this one with --role secondary, or stop the other first"


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


def primary_lease(database_url: str) -> PrimaryLease:
    """The lease for the database at `database_url` (DatabaseNotOpened: a URL we
    do not support)."""
    url = supported_url(database_url)
    if url.get_backend_name() == "postgresql":
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
                f"{self.path}): {_REFUSAL}"
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


class AdvisoryLockLease:
    """A session-level advisory lock held on a dedicated autocommit connection."""

    def __init__(self, url: URL) -> None:
        self._shown = describe_url(url.render_as_string(hide_password=False))
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._timeout: dict[str, int] = {}
        if "connect_timeout" not in url.query:
            self._timeout["connect_timeout"] = _CONNECT_TIMEOUT_SECONDS
        self._connection: psycopg.Connection[tuple[object, ...]] | None = None

    @property
    def held(self) -> bool:
        return self._connection is not None

    def acquire(self) -> None:
        holder = self._try_lock()
        if holder is not None:
            raise LeaseHeld(
                f"another primary holds the database {self._shown} ({holder}): {_REFUSAL}"
            )

    def try_acquire(self) -> bool:
        return self.held or self._try_lock() is None

    def check(self) -> bool:
        if self._connection is None:
            return False
        try:
            self._connection.execute("SELECT 1")  # the lock lives as long as the session
            return True
        except psycopg.Error:
            self._close()
            return False

    def release(self) -> None:
        # Unlocked before the session ends: a closed session's locks go only when
        # its server process exits, after the close returns, so a primary taking
        # the lease at once could still find it held.
        if self._connection is not None:
            with contextlib.suppress(psycopg.Error):
                self._connection.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
        self._close()

    def _try_lock(self) -> str | None:
        """None once the lock is ours, else a description of who holds it."""
        connection = self._connect()
        try:
            row = connection.execute(
                "SELECT pg_try_advisory_lock(%s)", (ADVISORY_LOCK_KEY,)
            ).fetchone()
            if row is not None and row[0] is True:
                self._connection = connection
                return None
            return self._holder(connection)
        except psycopg.Error as error:
            raise DatabaseNotOpened(
                f"cannot take the lease on {self._shown}: {one_line(error)}"
            ) from None
        finally:
            if self._connection is not connection:
                connection.close()

    def _connect(self) -> "psycopg.Connection[tuple[object, ...]]":
        try:
            conninfo = psycopg.conninfo.make_conninfo(
                self._conninfo, application_name=holder_name()[:63], **self._timeout, **_KEEPALIVES
            )
            return psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error as error:
            raise DatabaseNotOpened(
                f"cannot reach the database {self._shown}: {one_line(error)}"
            ) from None

    @staticmethod
    def _holder(connection: "psycopg.Connection[tuple[object, ...]]") -> str:
        """The holder's application name, as it set it (best effort)."""
        row = connection.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0"
            " AND l.objid::bigint = %s AND l.objsubid = 1"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (ADVISORY_LOCK_KEY,),
        ).fetchone()
        return str(row[0]) if row is not None and row[0] else "holder unknown"

    def _close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(psycopg.Error):
                self._connection.close()
            self._connection = None
