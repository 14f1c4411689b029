"""The primary's lease on PostgreSQL: a session-level advisory lock held on a
dedicated connection (storage/lease.py says why and how it is used). Apart
from lease.py so that a SQLite instance never imports psycopg (0.2 s of every
start)."""

import contextlib

import psycopg
from sqlalchemy.engine import URL

from arbiter.storage.engine import describe_url, one_line
from arbiter.storage.errors import DatabaseNotOpened, LeaseHeld
from arbiter.storage.lease import ADVISORY_LOCK_KEY, REFUSAL, holder_name
from arbiter.storage.libpq import libpq_conninfo

HOLDER_PREFIX = "arbiter primary "  # holder_name(); the pool's sessions say "arbiter on ..."

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


class AdvisoryLockLease:
    """A session-level advisory lock held on a dedicated autocommit connection."""

    def __init__(self, url: URL) -> None:
        self._shown = describe_url(url.render_as_string(hide_password=False))
        self._conninfo = libpq_conninfo(url)
        self._timeout: dict[str, int] = {}
        if "connect_timeout" not in url.query:
            self._timeout["connect_timeout"] = _CONNECT_TIMEOUT_SECONDS
        self._connection: psycopg.Connection[tuple[object, ...]] | None = None

    @property
    def held(self) -> bool:
        return self._connection is not None

    def acquire(self) -> None:
        if self.held:  # a standby that took it already (commands/serve.py)
            return
        holder = self._try_lock()
        if holder is not None:
            raise LeaseHeld(
                f"another primary holds the database {self._shown} ({holder}): {REFUSAL}"
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

    def evict_holder(self) -> int:
        """End every session of the process holding the lease (a frozen
        primary's: its lease session and its pool's, open transactions rolled
        back), so the lease is free and nothing of that process commits any
        more; how many sessions were ended."""
        connection = self._connect()
        try:
            holder = self._holder(connection)
            if not holder.startswith(HOLDER_PREFIX):
                return 0
            names = [holder, "arbiter " + holder.removeprefix(HOLDER_PREFIX)]
            ended = connection.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = ANY(%s) AND pid <> pg_backend_pid()",
                (names,),
            ).fetchone()
            count = ended[0] if ended else 0
            return count if isinstance(count, int) else 0
        except psycopg.Error:
            return 0
        finally:
            connection.close()

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
