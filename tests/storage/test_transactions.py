"""Units of work: `write()` commits all or nothing, `read()` sees what was committed."""

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import event

from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter, NewAction
from arbiter.storage.engine import make_engine
from arbiter.storage.errors import QueryTooLong
from tests.storage.support import T0, add_user, new_user


class BoomError(Exception):
    pass


def test_write_commits_on_leaving_the_block(storage: Storage) -> None:
    with storage.write() as tx:
        tx.users.add(new_user("alice"))
        tx.kv.set("key", "value")
    with storage.read() as tx:
        assert tx.users.get("alice") is not None
        assert tx.kv.get("key") == "value"


def test_exception_inside_write_rolls_back_everything(storage: Storage) -> None:
    bob = add_user(storage, "bob")

    def change_everything_then_fail() -> None:
        with storage.write() as tx:
            tx.users.add(new_user("alice"))
            tx.users.set_blocked(bob.id, True)
            tx.kv.set("key", "value")
            tx.actions.add(NewAction(time=T0, action="log_message", username="alice"))
            tx.worker_blocks.set("alice-4cores", blocked=True, message="", at=T0)
            raise BoomError

    with pytest.raises(BoomError):
        change_everything_then_fail()
    with storage.read() as tx:
        assert tx.users.get("alice") is None
        assert tx.users.get_by_id(bob.id) == bob
        assert tx.kv.get("key") is None
        assert tx.actions.query(ActionFilter()) == []
        assert tx.worker_blocks.get("alice-4cores") is None


def test_read_sees_committed_data(storage: Storage) -> None:
    with storage.read() as tx:
        assert tx.kv.get("key") is None
    with storage.write() as tx:
        tx.kv.set("key", 1)
    with storage.read() as tx:
        assert tx.kv.get("key") == 1


def test_read_does_not_see_or_wait_for_an_open_write(storage: Storage) -> None:
    with storage.write() as writer:
        writer.kv.set("key", "uncommitted")
        with storage.read() as reader:
            assert reader.kv.get("key") is None
    with storage.read() as reader:
        assert reader.kv.get("key") == "uncommitted"


def test_concurrent_writers_on_both_backends_all_commit(storage: Storage) -> None:
    barrier = threading.Barrier(4)

    def register(name: str) -> None:
        barrier.wait()
        with storage.write() as tx:
            tx.users.add(new_user(name))

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(register, f"user{i}") for i in range(4)]
        for future in futures:
            future.result()
    with storage.read() as tx:
        assert len(tx.users.list()) == 4


@pytest.fixture
def sqlite_storage(sqlite_database_url: str) -> Iterator[Storage]:
    engine = make_engine(sqlite_database_url, pool_size=5)
    yield Storage(engine)
    engine.dispose()


def test_sqlite_writers_in_threads_queue_instead_of_failing(sqlite_storage: Storage) -> None:
    """Read-then-write transactions overlap; with a deferred BEGIN one would fail at
    once with "database is locked" (or lose an update). BEGIN IMMEDIATE serializes them."""
    with sqlite_storage.write() as tx:
        tx.kv.set("counter", 0)
    increments_per_thread = 5
    barrier = threading.Barrier(2)

    def increment() -> None:
        barrier.wait()
        for _ in range(increments_per_thread):
            with sqlite_storage.write() as tx:
                value = tx.kv.get("counter")
                time.sleep(0.005)  # hold the transaction so the other thread collides
                tx.kv.set("counter", value + 1)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(increment) for _ in range(2)]
        for future in futures:
            future.result()
    with sqlite_storage.read() as tx:
        assert tx.kv.get("counter") == 2 * increments_per_thread


def test_sqlite_writers_of_one_process_never_meet_the_busy_handler(
    sqlite_database_url: str,
) -> None:
    """With SQLite's busy timeout at 0, a contended BEGIN IMMEDIATE fails at once; the
    process's own writer lock means threads of one process never contend in SQLite
    (where the busy handler would make them sleep up to 100 ms between polls)."""
    engine = make_engine(sqlite_database_url, pool_size=8)

    @event.listens_for(engine, "connect")
    def no_busy_wait(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout=0")

    storage = Storage(engine)
    threads, writes = 8, 20
    barrier = threading.Barrier(threads)

    def write_many(thread: int) -> None:
        barrier.wait()
        for index in range(writes):
            with storage.write() as tx:
                tx.kv.set(f"{thread}-{index}", index)

    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for future in [pool.submit(write_many, thread) for thread in range(threads)]:
                future.result()
        with storage.read() as tx:
            assert all(tx.kv.get(f"{t}-{i}") == i for t in range(threads) for i in range(writes))
    finally:
        engine.dispose()


def test_a_held_connection_serves_the_threads_transactions_until_the_block_ends(
    sqlite_storage: Storage,
) -> None:
    storage = sqlite_storage
    pool = storage.engine.pool
    with storage.connection_held():
        assert pool.checkedout() == 0  # taken by the first transaction, not before
        with storage.write() as tx:
            first = tx.connection
            with storage.read() as nested:  # inside a transaction: a connection of its own
                assert nested.connection is not first
                assert pool.checkedout() == 2
        with storage.read() as tx:
            assert tx.connection is first
        with storage.write() as tx:
            assert tx.connection is first
        assert pool.checkedout() == 1
        elsewhere = in_thread_checked_out(storage)
        assert elsewhere is not first  # held for this thread only
    assert pool.checkedout() == 0


def in_thread_checked_out(storage: Storage) -> object:
    seen: list[object] = []

    def use() -> None:
        with storage.read() as tx:
            seen.append(tx.connection)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    return seen[0]


def test_on_postgresql_each_transaction_still_gets_a_pinged_pooled_connection(
    postgres_database_url: str,
) -> None:
    """A held connection would fail its next batch after a server restart; the
    pool's pre-ping does not."""
    engine = make_engine(postgres_database_url, pool_size=5)
    storage = Storage(engine)
    try:
        with storage.connection_held():
            with storage.write():
                pass
            assert engine.pool.checkedout() == 0  # returned after the transaction
    finally:
        engine.dispose()


def test_a_postponed_write_is_committed_and_pending_only_where_a_sync_is_ours(
    storage: Storage, database_url: str
) -> None:
    """On SQLite the fsync is left to the block's `wait()`; PostgreSQL's commit is
    durable when it returns, so nothing is pending there and nobody waits."""
    with storage.durable_later() as pending:
        add_user(storage, "alice")
    with storage.read() as tx:
        assert tx.users.get("alice") is not None
    assert pending.pending == database_url.startswith("sqlite")
    pending.wait()
    assert not pending.pending


HANG_GUARD = 30.0  # s: only a hang fails this, never a slow host
ENDLESS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
    "SELECT count(*) FROM c"
)


def test_a_time_limited_read_stops_a_long_query_and_its_connection_serves_again(
    storage: Storage,
) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTooLong, match=r"past 0\.2 s"), storage.read(time_limit=0.2) as tx:
        tx.connection.exec_driver_sql(ENDLESS)
    assert time.monotonic() - started < HANG_GUARD
    for _ in range(3):  # every pooled connection: none keeps the limit
        with storage.read() as tx:
            assert tx.connection.exec_driver_sql("SELECT 1").scalar() == 1
    with storage.read(time_limit=5.0) as tx:  # within its limit, a read is a read
        assert tx.kv.get("nothing") is None
