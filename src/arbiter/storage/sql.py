"""The unit of work: one transaction, with every store bound to it.

    with storage.write() as tx:
        user = tx.users.get("alice")
        tx.actions.add(...)

Leaving the block commits; an exception rolls everything back. `write()` takes
SQLite's write lock up front (BEGIN IMMEDIATE, see engine.py); `read()` never
writes. A new store is one more property on `Tx`.
"""

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from arbiter.storage import durability
from arbiter.storage.base import (
    ActionStore,
    BookStore,
    Chi2SummaryStore,
    ContributionStore,
    FileChunkStore,
    KVStore,
    MachineHealthStore,
    NetStore,
    PgnStore,
    QuarantineStore,
    RunStore,
    SessionStore,
    TaskStore,
    TokenStore,
    UserStore,
    WorkerBlockStore,
)
from arbiter.storage.engine import held_connection, read_transaction, write_transaction
from arbiter.storage.errors import StorageUnavailable
from arbiter.storage.sql_actions import SqlActionStore
from arbiter.storage.sql_chi2 import SqlChi2SummaryStore
from arbiter.storage.sql_contributions import SqlContributionStore
from arbiter.storage.sql_files import SqlBookStore, SqlFileChunkStore, SqlNetStore, SqlPgnStore
from arbiter.storage.sql_import import SqlImportStore
from arbiter.storage.sql_kv import SqlKVStore
from arbiter.storage.sql_notify import SqlFollowStore, SqlRunEventStore, SqlWebhookStore
from arbiter.storage.sql_runs import SqlRunStore, SqlTaskStore
from arbiter.storage.sql_sessions import SqlSessionStore
from arbiter.storage.sql_tokens import SqlTokenStore
from arbiter.storage.sql_users import SqlUserStore
from arbiter.storage.sql_workers import (
    SqlMachineHealthStore,
    SqlQuarantineStore,
    SqlWorkerBlockStore,
)


class Tx:
    """The stores of one open transaction. Valid only inside its `with` block."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @cached_property
    def users(self) -> UserStore:
        return SqlUserStore(self.connection)

    @cached_property
    def sessions(self) -> SessionStore:
        return SqlSessionStore(self.connection)

    @cached_property
    def tokens(self) -> TokenStore:
        return SqlTokenStore(self.connection)

    @cached_property
    def actions(self) -> ActionStore:
        return SqlActionStore(self.connection)

    @cached_property
    def kv(self) -> KVStore:
        return SqlKVStore(self.connection)

    @cached_property
    def runs(self) -> RunStore:
        return SqlRunStore(self.connection)

    @cached_property
    def tasks(self) -> TaskStore:
        return SqlTaskStore(self.connection)

    @cached_property
    def contributions(self) -> ContributionStore:
        return SqlContributionStore(self.connection)

    @cached_property
    def chi2(self) -> Chi2SummaryStore:
        return SqlChi2SummaryStore(self.connection)

    @cached_property
    def quarantine(self) -> QuarantineStore:
        return SqlQuarantineStore(self.connection)

    @cached_property
    def machine_health(self) -> MachineHealthStore:
        return SqlMachineHealthStore(self.connection)

    @cached_property
    def worker_blocks(self) -> WorkerBlockStore:
        return SqlWorkerBlockStore(self.connection)

    @cached_property
    def pgns(self) -> PgnStore:
        return SqlPgnStore(self.connection)

    @cached_property
    def nets(self) -> NetStore:
        return SqlNetStore(self.connection)

    @cached_property
    def books(self) -> BookStore:
        return SqlBookStore(self.connection)

    @cached_property
    def imports(self) -> SqlImportStore:
        """Bulk writes of an import (`arbiter import fishtest`), nothing else."""
        return SqlImportStore(self.connection)

    @cached_property
    def follows(self) -> SqlFollowStore:
        return SqlFollowStore(self.connection)

    @cached_property
    def run_events(self) -> SqlRunEventStore:
        return SqlRunEventStore(self.connection)

    @cached_property
    def webhooks(self) -> SqlWebhookStore:
        return SqlWebhookStore(self.connection)

    @cached_property
    def file_chunks(self) -> FileChunkStore:
        return SqlFileChunkStore(self.connection)


class Storage:
    """Hands out transactions on one engine. Thread-safe: each call gets its own connection."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Run first in every write transaction once set: the primary's fence
        # (storage/lease_fence.py), on PostgreSQL.
        self.fence: Callable[[Connection], None] | None = None

    @contextmanager
    def write(self) -> Iterator[Tx]:
        with _available(), write_transaction(self.engine) as connection:
            if self.fence is not None:
                self.fence(connection)
            yield Tx(connection)

    @contextmanager
    def connection_held(self) -> Iterator[None]:
        """This thread's transactions inside the block share one connection on
        SQLite (`engine.held_connection`): for threads that commit all the time."""
        with held_connection(self.engine):
            yield

    @contextmanager
    def durable_on_exit(self) -> Iterator[None]:
        """Writes inside this block return before their commit is durable; the
        block's exit waits for that. Open it around a lock held while writing,
        so that lock is not held while the disk syncs (`storage/durability.py`)."""
        with durability.deferred():
            yield

    @contextmanager
    def durable_later(self) -> Iterator[durability.Durability]:
        """Writes inside this block return before their commit is durable, and so
        does the block: whoever answers for them calls the yielded object's
        `wait()` first, in any thread (`storage/durability.py`)."""
        with durability.postponed() as pending:
            yield pending

    @contextmanager
    def read(self, time_limit: float | None = None) -> Iterator[Tx]:
        """A read-only transaction; with `time_limit` (seconds) a statement that
        runs past it is stopped (QueryTooLong): for queries anyone may send."""
        with _available(), read_transaction(self.engine, time_limit) as connection:
            yield Tx(connection)


@contextmanager
def _available() -> Iterator[None]:
    """Turn "the database is not there" into StorageUnavailable; other errors pass."""
    try:
        yield
    except (OperationalError, InterfaceError) as error:
        if not _is_unavailable(error):
            raise
        raise StorageUnavailable(str(error.orig)) from error


def _is_unavailable(error: DBAPIError) -> bool:
    if error.connection_invalidated:
        return True
    if not isinstance(error.orig, sqlite3.Error):
        return True  # PostgreSQL: refused, terminated, shutting down, ...
    return "database is locked" in str(error.orig)  # SQLite past its busy timeout
