"""A database that cannot be reached is StorageUnavailable (the web layer answers a
retryable 503), not an arbitrary driver exception (a 500)."""

import socket
import sqlite3

import pytest
from sqlalchemy import event, make_url
from sqlalchemy.exc import OperationalError

from arbiter.storage import Storage, StorageUnavailable
from arbiter.storage.engine import make_engine
from arbiter.storage.sql import _available


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.parametrize("unit", ["read", "write"])
def test_postgresql_that_is_down_is_unavailable(unit: str) -> None:
    engine = make_engine(f"postgresql://postgres@127.0.0.1:{closed_port()}/arbiter", pool_size=1)
    storage = Storage(engine)
    try:
        with pytest.raises(StorageUnavailable), getattr(storage, unit)():
            pass
    finally:
        engine.dispose()


def test_sqlite_locked_past_its_timeout_is_unavailable() -> None:
    locked = sqlite3.OperationalError("database is locked")
    with pytest.raises(StorageUnavailable), _available():
        raise OperationalError("BEGIN IMMEDIATE", {}, locked)


def test_a_write_lock_held_by_another_process_is_unavailable(sqlite_database_url: str) -> None:
    """The real path: BEGIN IMMEDIATE, sent on the driver's connection, meets a lock
    held past the busy timeout (here 0) and the caller sees StorageUnavailable;
    the connection is fine afterwards."""
    engine = make_engine(sqlite_database_url)
    event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA busy_timeout=0"))
    storage = Storage(engine)
    with storage.write() as tx:
        tx.kv.set("before", 1)
    holder = sqlite3.connect(str(make_url(sqlite_database_url).database), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StorageUnavailable, match="locked"), storage.write() as tx:
            tx.kv.set("during", 1)
        holder.execute("ROLLBACK")
        with storage.write() as tx:
            tx.kv.set("after", 1)
        with storage.read() as tx:
            assert (tx.kv.get("before"), tx.kv.get("during"), tx.kv.get("after")) == (1, None, 1)
    finally:
        holder.close()
        engine.dispose()


def test_other_operational_errors_are_not_hidden() -> None:
    schema_bug = sqlite3.OperationalError("no such table: nothing")
    with pytest.raises(OperationalError), _available():
        raise OperationalError("SELECT", {}, schema_bug)
