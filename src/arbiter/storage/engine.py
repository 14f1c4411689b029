"""Connections to the database: one SQLAlchemy engine per process.

SQLite is the embedded default. It runs in WAL mode (readers never wait for the
writer) with a busy timeout, and every write transaction starts with
`BEGIN IMMEDIATE`: a deferred transaction that later tries to write can fail at
once with "database is locked" whatever the timeout, an immediate one waits its
turn. Commits use `synchronous=NORMAL` and are made durable by a group fsync
of the WAL before anyone is answered (`storage/durability.py`).

Writers of one process also queue on a Python lock before `BEGIN IMMEDIATE`.
SQLite's own busy handler polls with sleeps that grow to 100 ms, so under a
fleet's load a writer could sleep 20-100 ms for a lock that was free again
after one; the Python lock hands it over at once. Other processes (a
secondary, the CLI) still meet the busy timeout.

PostgreSQL is reached through psycopg 3; `postgresql://` URLs are accepted as is.
"""

import math
import os
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
from sqlalchemy import Connection, Engine, RootTransaction, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from arbiter.storage import durability, request_bounds
from arbiter.storage.errors import DatabaseNotOpened, QueryAbandoned, QueryTooLong
from arbiter.storage.half_time import HalfTime, half_time
from arbiter.telemetry import COMMIT_SECONDS

SQLITE_BUSY_TIMEOUT_MS = 30_000
PROGRESS_STEPS = 20_000  # SQLite steps between two looks at a transaction's bound
_PG_QUERY_CANCELED = "57014"
# A wrong or unreachable PostgreSQL host fails start-up within this many seconds
# instead of hanging on TCP retries; a URL's own connect_timeout wins.
PG_CONNECT_TIMEOUT_SECONDS = 10
# The drivers we ship, after normalize_url: anything else is refused at once.
SUPPORTED_DRIVERS = ("sqlite", "sqlite+pysqlite", "postgresql+psycopg")
# Set while a writer opens its transaction: the begin hook then takes SQLite's
# write lock at once (BEGIN IMMEDIATE). A flag, not an execution option: setting
# an option on each write's connection cost more than the BEGIN itself.
_beginning_write = threading.local()
_held = threading.local()  # this thread's held connections, by engine (held_connection)
_PROGRESS_KEY = "arbiter.progress"  # a SQLite connection's _Progress, in its pool record's info
_STATEMENT_TIMEOUT_KEY = "arbiter.statement_timeout"  # a PostgreSQL connection's, in ms
# Seconds a transaction made for a request may run, per engine (make_engine).
_REQUEST_SECONDS: "weakref.WeakKeyDictionary[Engine, float]" = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class _SqliteWriters:
    """What the writers of one SQLite engine share."""

    # Reentrant: a nested write on this thread meets SQLite's busy timeout, as
    # without the lock, instead of hanging.
    lock: threading.RLock = field(default_factory=threading.RLock)
    sync: durability.WalSync | None = None  # None: an in-memory database


_WRITERS: "weakref.WeakKeyDictionary[Engine, _SqliteWriters]" = weakref.WeakKeyDictionary()


def encode_json(value: object) -> str:
    """JSON columns (a run's args are rewritten with every result) through msgspec:
    several times faster than the standard library, same text for our values."""
    return msgspec.json.encode(value).decode()


def sqlite_url(data_dir: Path) -> str:
    """The default database: a SQLite file inside the data directory."""
    return f"sqlite:///{(data_dir / 'arbiter.sqlite3').resolve()}"


def normalize_url(url: str) -> str:
    """Map the URL forms operators write to the driver we ship (psycopg 3); a
    libpq multi-host URL (`postgresql://user@h1:5432,h2:5432/db?...`, for a
    primary and its replicas) becomes SQLAlchemy's form of it, one `host`
    parameter each."""
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return _multi_host("postgresql+psycopg://", url[len(prefix) :])
    return url


def _multi_host(scheme: str, rest: str) -> str:
    """`user@h1:p1,h2:p2/db?q` -> `user@/db?host=h1:p1&host=h2:p2&q` (unchanged
    without a comma among the hosts)."""
    authority, _, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if "," not in hosts:
        return scheme + rest
    database, _, query = path.partition("?")
    params = [f"host={quote(host, safe='')}" for host in hosts.split(",") if host]
    if query:
        params.append(query)
    return f"{scheme}{userinfo}{at}/{database}?{'&'.join(params)}"


def is_sqlite(url: str) -> bool:
    return make_url(normalize_url(url)).get_backend_name() == "sqlite"


def supported_url(url: str) -> URL:
    """The parsed, normalized URL; DatabaseNotOpened when it is not one we can open
    (a mysql:// URL would otherwise fail deep inside SQLAlchemy on a missing module)."""
    try:
        parsed = make_url(normalize_url(url))
    except ArgumentError:
        raise DatabaseNotOpened(
            "cannot parse the database URL: expected sqlite:///PATH or "
            "postgresql://USER@HOST:PORT/NAME"
        ) from None
    if parsed.drivername not in SUPPORTED_DRIVERS:
        raise DatabaseNotOpened(
            f"unsupported database URL scheme {parsed.drivername!r}: "
            "use sqlite:///PATH or postgresql://USER@HOST:PORT/NAME"
        )
    return parsed


def describe_url(url: str) -> str:
    """The URL as it may be shown to an operator: as operators write it (no driver
    name), never with its password."""
    parsed = make_url(normalize_url(url))
    return parsed.set(drivername=parsed.get_backend_name()).render_as_string(hide_password=True)


def one_line(error: BaseException) -> str:
    """A driver's message (libpq's spans several lines) as one line."""
    return " ".join(part.strip() for part in str(error).splitlines() if part.strip())


def probe(engine: Engine) -> None:
    """Connect once, so an unreachable database is one clear error at start-up
    rather than a traceback from the first query. Blocking."""
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError as error:
        where = describe_url(engine.url.render_as_string(hide_password=False))
        raise DatabaseNotOpened(
            f"cannot reach the database {where}: {one_line(error.orig or error)}"
        ) from None


def make_engine(url: str, *, pool_size: int = 20, request_seconds: float = 0.0) -> Engine:
    """Create the process's engine. Runs in the threadpool (it may touch disk).
    A transaction made for a request may run `request_seconds` (0: no bound;
    storage/request_bounds.py). DatabaseNotOpened for a URL we do not
    support; connects lazily."""
    engine = _make_engine(url, pool_size)
    _REQUEST_SECONDS[engine] = request_seconds
    if engine.dialect.name == "postgresql" and request_seconds > 0:
        event.listen(engine, "checkout", _statement_timeout_setter(request_seconds))
    return engine


def _statement_timeout_setter(seconds: float) -> Callable[[Any, Any, Any], None]:
    """A PostgreSQL pool's checkout hook: a connection handed out for a request
    has `statement_timeout` at the request bound, one handed out for anything
    else none. Set for the session, and only when the connection's setting is
    not already the one wanted: a `SET LOCAL` in each request's transaction
    was one more round trip each, which cost honest requests beside a flood
    of searches 3 times their p99 (bench/flood.py). Committed at once, so a
    rollback never takes it back."""
    bound = _milliseconds(seconds)

    def set_statement_timeout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        wanted = bound if request_bounds.current() is not None else 0
        if record.info.get(_STATEMENT_TIMEOUT_KEY) == wanted:
            return
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET statement_timeout = {wanted}")
        dbapi_connection.commit()
        record.info[_STATEMENT_TIMEOUT_KEY] = wanted

    return set_statement_timeout


def _milliseconds(seconds: float) -> int:
    """A `statement_timeout` in PostgreSQL's unit, never 0 (which means none)."""
    return max(1, round(seconds * 1000))


def _make_engine(url: str, pool_size: int) -> Engine:
    parsed = supported_url(url)
    url = parsed.render_as_string(hide_password=False)
    if is_sqlite(url):
        return _sqlite_engine(url, pool_size)
    connect_args: dict[str, object] = {}
    if "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_SECONDS
    if "application_name" not in parsed.query:
        # The process that holds each session: a standby ends every session of a
        # frozen primary by this name (storage/lease_postgresql.py).
        connect_args["application_name"] = process_name()[:63]
    return create_engine(
        url,
        json_serializer=encode_json,
        json_deserializer=msgspec.json.decode,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,  # survive a database restart without a failed request
        pool_timeout=30,
        connect_args=connect_args,
    )


def process_name() -> str:
    """How this process names itself to PostgreSQL: host and pid."""
    return f"arbiter on {socket.gethostname()} (pid {os.getpid()})"


def _sqlite_engine(url: str, pool_size: int) -> Engine:
    database = make_url(url).database
    on_disk = bool(database) and database != ":memory:"
    if on_disk:
        folder = Path(str(database)).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DatabaseNotOpened(
                f"cannot create the data directory {folder}: {error.strerror or error}"
            ) from None
    engine = create_engine(
        url,
        json_serializer=encode_json,
        json_deserializer=msgspec.json.decode,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=30,
        # Every use ends its transaction itself (`Connection.close` rolls back what
        # is left), so the pool's extra ROLLBACK on check-in is pure cost.
        pool_reset_on_return=None,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
    )
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    sync = durability.WalSync(Path(str(database)).resolve()) if on_disk else None
    _WRITERS[engine] = _SqliteWriters(sync=sync)
    return engine


def wal_sync(engine: Engine) -> durability.WalSync | None:
    """The group-commit syncs of a SQLite file's engine (None for other engines)."""
    writers = _WRITERS.get(engine)
    return writers.sync if writers is not None else None


def _configure_sqlite_connection(dbapi_connection: Any, record: Any) -> None:
    # Take transaction control away from the sqlite3 module so that our own
    # BEGIN statements (below) are the only ones issued.
    dbapi_connection.isolation_level = None
    progress = record.info[_PROGRESS_KEY] = _Progress()
    dbapi_connection.set_progress_handler(progress, PROGRESS_STEPS)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")  # see storage/durability.py
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _begin_sqlite_transaction(connection: Connection) -> None:
    """Open the transaction on the driver's connection itself: as a statement of
    SQLAlchemy's (`exec_driver_sql`) the BEGIN cost 40 us of CPU, a third of an
    empty write transaction (measured on the fleet). Its errors are wrapped as SQLAlchemy's
    would be (a lock held past the busy timeout is an OperationalError), so
    callers see the same exceptions."""
    statement = "BEGIN IMMEDIATE" if getattr(_beginning_write, "now", False) else "BEGIN DEFERRED"
    driver = connection.connection.driver_connection
    try:
        driver.execute(statement)  # type: ignore[union-attr]
    except sqlite3.Error as error:
        raise DBAPIError.instance(statement, (), error, sqlite3.Error) from error


def _begin_write(connection: Connection) -> RootTransaction:
    _beginning_write.now = True
    try:
        return connection.begin()
    finally:
        _beginning_write.now = False


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that will write: committed on success, rolled back on error.

    Returns once the commit is durable, or, inside `durability.deferred()`,
    once SQLite has it and the block's exit will wait for the rest."""
    writers = _WRITERS.get(engine)
    if writers is None:  # PostgreSQL makes each commit durable itself
        with (
            _connection(engine) as connection,
            connection.begin() as transaction,
            _bounded(connection, None, writes=True),
        ):
            yield connection
            _timed_commit(transaction)
        return
    with writers.lock, _connection(engine) as connection:
        with _begin_write(connection) as transaction, _bounded(connection, None, writes=True):
            yield connection
            committing = time.perf_counter()
            transaction.commit()
        ticket = writers.sync.ticket() if writers.sync is not None else 0
    if writers.sync is not None:
        durability.settle(writers.sync, ticket)
    COMMIT_SECONDS.observe(time.perf_counter() - committing)


def _timed_commit(transaction: RootTransaction) -> None:
    started = time.perf_counter()
    transaction.commit()
    COMMIT_SECONDS.observe(time.perf_counter() - started)


@contextmanager
def read_transaction(engine: Engine, time_limit: float | None = None) -> Iterator[Connection]:
    """A consistent read-only snapshot. With `time_limit` (seconds), a statement
    that runs longer is stopped and QueryTooLong raised, and the read takes
    turns at working (storage/half_time.py); without it, a request's read has
    the request bound (storage/request_bounds.py)."""
    with (
        _connection(engine) as connection,
        connection.begin(),
        _bounded(connection, time_limit, writes=False),
    ):
        yield connection


def request_bound(engine: Engine) -> float:
    """Seconds a transaction made for a request may run on `engine` (0: no bound)."""
    return _REQUEST_SECONDS.get(engine, 0.0)


@contextmanager
def _bounded(connection: Connection, time_limit: float | None, *, writes: bool) -> Iterator[None]:
    """The database's own bound on this transaction: `time_limit`, or the
    request bound when the transaction is made for a request. A request's
    read also stops when the request is abandoned; its writes are left to end
    within the bound, so a handler is never cut between two of them by its
    client leaving. Outside a request and without a limit, nothing is done."""
    queries = request_bounds.current()
    if queries is None and time_limit is None:
        yield
        return
    seconds = request_bound(connection.engine) if time_limit is None else time_limit
    abandonable = None if writes else queries
    driver = connection.connection.driver_connection
    try:
        with (
            _joined(abandonable, driver),
            _stopped_after(connection, seconds, abandonable, time_limit),
        ):
            yield
    except DBAPIError as error:
        if not _is_stopped(error):
            raise
        if abandonable is not None and abandonable.abandoned:
            raise QueryAbandoned(request_bounds.ABANDONED) from error
        raise QueryTooLong(seconds) from error


@contextmanager
def _joined(queries: request_bounds.RequestQueries | None, driver: Any) -> Iterator[None]:
    if queries is None:
        yield
        return
    with queries.transaction_of(driver):
        yield


@contextmanager
def _stopped_after(
    connection: Connection,
    seconds: float,
    queries: request_bounds.RequestQueries | None,
    time_limit: float | None,
) -> Iterator[None]:
    """The transaction's deadline (`seconds`, 0 for none), its request's
    abandonment, and with a `time_limit` its turns at working."""
    with half_time() if time_limit is not None else nullcontext(None) as pacer:
        if connection.dialect.name == "postgresql":
            # The request bound is the session's already (_statement_timeout_setter).
            if time_limit is not None:
                milliseconds = _milliseconds(time_limit)
                connection.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")
            yield  # SET LOCAL ends with the transaction
            return
        progress: _Progress = connection.connection.info[_PROGRESS_KEY]
        progress.watch(seconds, queries, pacer)
        try:
            yield
        finally:
            progress.unwatch()


class _Progress:
    """A SQLite connection's progress handler: called every PROGRESS_STEPS
    virtual machine steps of any statement, it stops the statement (by
    returning non-zero) past the transaction's deadline or once its request
    is abandoned. Between bounded transactions it only returns 0."""

    __slots__ = ("deadline", "pacer", "queries")
    deadline: float
    queries: request_bounds.RequestQueries | None
    pacer: HalfTime | None

    def __init__(self) -> None:
        self.unwatch()

    def watch(
        self,
        seconds: float,
        queries: request_bounds.RequestQueries | None,
        pacer: HalfTime | None,
    ) -> None:
        self.deadline = time.monotonic() + seconds if seconds > 0 else math.inf
        self.queries = queries
        self.pacer = pacer

    def unwatch(self) -> None:
        self.deadline = math.inf
        self.queries = None
        self.pacer = None

    def __call__(self) -> int:
        if self.pacer is not None:
            self.pacer.tick()
        if self.queries is not None and self.queries.abandoned:
            return 1
        return int(self.deadline != math.inf and time.monotonic() > self.deadline)


def _is_stopped(error: DBAPIError) -> bool:
    if getattr(error.orig, "sqlstate", None) == _PG_QUERY_CANCELED:
        return True
    return str(error.orig) == "interrupted"  # sqlite3's message for a handler's stop


@contextmanager
def held_connection(engine: Engine) -> Iterator[None]:
    """Transactions this thread opens on a SQLite `engine` inside the block share
    one connection, checked out by the first of them and kept: a batch thread
    (domain/runs/call_batches.py) commits hundreds of times a second, and each
    checkout and check-in cost about 34 us of CPU (measured on the fleet). A transaction
    opened while the held one is in use (nested) gets a connection of its own,
    as outside the block. On PostgreSQL nothing is held: the pool pings each
    connection it hands out, so a restarted server costs no failed request,
    and a held connection would meet the restart with a batch's worth.
    [THREADPOOL]"""
    held = _held_connections()
    if engine not in _WRITERS or engine in held:
        yield
        return
    held[engine] = None
    try:
        yield
    finally:
        connection = held.pop(engine)
        if connection is not None:
            connection.close()


@contextmanager
def _connection(engine: Engine) -> Iterator[Connection]:
    held = _held_connections()
    connection = held.get(engine)
    if engine not in held or (connection is not None and connection.in_transaction()):
        with engine.connect() as own:
            yield own
        return
    if connection is None:
        # Checked out inside the caller's transaction block, so an unreachable
        # database is reported as for any other transaction.
        connection = held[engine] = engine.connect()
    yield connection


def _held_connections() -> dict[Engine, Connection | None]:
    held: dict[Engine, Connection | None] = _held.__dict__.setdefault("connections", {})
    return held
