"""Group commit on SQLite: every write is synced before it returns (or before the
`durable_on_exit` block around it ends), and one sync serves many commits."""

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from arbiter.storage import Storage, durability
from arbiter.storage.durability import WalSync, deferred
from arbiter.storage.engine import make_engine, sqlite_url
from arbiter.storage.engine import wal_sync as engine_wal_sync
from tests.storage.support import held_syncs


@pytest.fixture
def sqlite_file_storage(tmp_path: Path) -> Iterator[Storage]:
    engine = make_engine(sqlite_url(tmp_path), pool_size=8)
    storage = Storage(engine)
    with storage.write() as tx:  # creates the schema-less database and its WAL
        tx.connection.exec_driver_sql("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT)")
    yield storage
    engine.dispose()


def wal_sync(storage: Storage) -> WalSync:
    sync = engine_wal_sync(storage.engine)
    assert sync is not None
    return sync


def put(storage: Storage, key: str) -> None:
    with storage.write() as tx:
        tx.connection.exec_driver_sql("INSERT INTO kv VALUES (?, 'v')", (key,))


def test_connections_leave_the_per_commit_sync_to_us(sqlite_file_storage: Storage) -> None:
    with sqlite_file_storage.read() as tx:
        assert tx.connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL


def test_a_write_outside_any_block_is_synced_before_it_returns(
    sqlite_file_storage: Storage,
) -> None:
    sync = wal_sync(sqlite_file_storage)
    before = sync.syncs
    put(sqlite_file_storage, "a")
    put(sqlite_file_storage, "b")
    assert sync.syncs == before + 2


def test_writes_inside_a_block_are_synced_once_when_it_ends(
    sqlite_file_storage: Storage,
) -> None:
    sync = wal_sync(sqlite_file_storage)
    before = sync.syncs
    with sqlite_file_storage.durable_on_exit():
        for key in "abc":
            put(sqlite_file_storage, key)
        with sqlite_file_storage.durable_on_exit():  # nested: the outer block waits
            put(sqlite_file_storage, "d")
        assert sync.syncs == before
    assert sync.syncs == before + 1


def test_the_block_syncs_even_when_it_ends_with_an_error(sqlite_file_storage: Storage) -> None:
    sync = wal_sync(sqlite_file_storage)
    before = sync.syncs

    def write_then_fail() -> None:
        with sqlite_file_storage.durable_on_exit():
            put(sqlite_file_storage, "a")
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        write_then_fail()
    assert sync.syncs == before + 1


def test_one_sync_covers_every_commit_made_before_it_began(tmp_path: Path) -> None:
    (tmp_path / "db-wal").write_bytes(b"frames")
    sync = WalSync(tmp_path / "db")
    tickets = [sync.ticket() for _ in range(3)]
    sync.wait(tickets[0])
    assert sync.syncs == 1
    for ticket in tickets:
        sync.wait(ticket)
    assert sync.syncs == 1
    sync.wait(sync.ticket())
    assert sync.syncs == 2


def test_a_missing_wal_means_nothing_is_left_to_sync(tmp_path: Path) -> None:
    sync = WalSync(tmp_path / "db")  # the last connection checkpointed and removed it
    sync.wait(sync.ticket())
    assert sync.syncs == 0


def test_concurrent_writers_share_syncs_and_all_commit(sqlite_file_storage: Storage) -> None:
    sync = wal_sync(sqlite_file_storage)
    before = sync.syncs
    threads, writes = 8, 25
    barrier = threading.Barrier(threads)

    def write_many(thread: int) -> None:
        barrier.wait()
        for index in range(writes):
            put(sqlite_file_storage, f"{thread}-{index}")

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(write_many, thread) for thread in range(threads)]:
            future.result()
    with sqlite_file_storage.read() as tx:
        count = tx.connection.exec_driver_sql("SELECT count(*) FROM kv").scalar()
    assert count == threads * writes
    assert 1 <= sync.syncs - before <= threads * writes  # never more than one per commit


def count_rows(storage: Storage) -> int:
    with storage.read() as tx:
        count: int = tx.connection.exec_driver_sql("SELECT count(*) FROM kv").scalar_one()
        return count


def test_a_write_returns_only_once_the_wal_is_synced(
    sqlite_file_storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit itself is in the WAL at once (a killed process keeps it), but the
    writer is answered only after an fdatasync of that WAL file has finished."""
    with ThreadPoolExecutor(max_workers=1) as pool, held_syncs(monkeypatch) as held:
        write = pool.submit(put, sqlite_file_storage, "a")
        held.wait_for_calls(1)
        assert count_rows(sqlite_file_storage) == 1  # committed...
        time.sleep(0.2)
        assert not write.done()  # ...but not acknowledged while its sync is held
        assert held.paths == [f"{sqlite_file_storage.engine.url.database}-wal"]
        held.released.set()
        write.result(timeout=10)


def test_commits_made_while_a_sync_runs_share_the_next_one(
    sqlite_file_storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit, deterministically: while the first writer's sync is held,
    seven more commit; once it is released, one more sync serves all seven."""
    sync = wal_sync(sqlite_file_storage)
    before = sync.syncs
    with ThreadPoolExecutor(max_workers=8) as pool, held_syncs(monkeypatch) as held:
        first = pool.submit(put, sqlite_file_storage, "first")
        held.wait_for_calls(1)
        first_ticket = sync.committed
        others = [pool.submit(put, sqlite_file_storage, f"other-{i}") for i in range(7)]
        deadline = time.monotonic() + 10
        # Tickets, not rows: a row is visible a moment before its writer takes the
        # ticket, and a commit without one yet would need a sync of its own.
        while sync.committed < first_ticket + 7:
            assert time.monotonic() < deadline, "the seven writers did not commit"
            time.sleep(0.005)
        assert count_rows(sqlite_file_storage) == 8
        assert not any(write.done() for write in [first, *others])
        held.released.set()
        for write in [first, *others]:
            write.result(timeout=10)
    assert sync.syncs == before + 2
    assert held.waiting() == 2


def test_a_block_on_one_thread_does_not_defer_another_threads_writes(
    sqlite_file_storage: Storage,
) -> None:
    sync = wal_sync(sqlite_file_storage)
    with deferred():
        before = sync.syncs
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(put, sqlite_file_storage, "other").result()
        assert sync.syncs == before + 1


def test_the_directory_is_synced_once_per_new_wal_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new WAL file's directory entry must reach the disk too (once): syncing
    the file alone would leave it unnamed after a power cut."""
    synced_directories: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        synced_directories.append(str(Path(f"/proc/self/fd/{descriptor}").readlink()))
        real_fsync(descriptor)

    monkeypatch.setattr(durability.os, "fsync", recording_fsync)
    wal = tmp_path / "db-wal"
    wal.write_bytes(b"frames")
    sync = WalSync(tmp_path / "db")
    sync.wait(sync.ticket())
    sync.wait(sync.ticket())  # the same file: its entry is already durable
    assert synced_directories == [str(tmp_path)]
    replacement = tmp_path / "new"  # made while the old one exists: another inode
    replacement.write_bytes(b"frames")
    replacement.replace(wal)
    sync.wait(sync.ticket())
    assert synced_directories == [str(tmp_path), str(tmp_path)]
    assert sync.syncs == 3


def test_a_commit_already_synced_never_waits_for_another_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one writer's sync is under way (held here), a writer whose commit an
    earlier sync covered returns at once instead of queueing behind the disk."""
    (tmp_path / "db-wal").write_bytes(b"frames")
    sync = WalSync(tmp_path / "db")
    covered = sync.ticket()
    sync.wait(covered)
    with ThreadPoolExecutor(max_workers=2) as pool, held_syncs(monkeypatch) as held:
        later = pool.submit(sync.wait, sync.ticket())
        held.wait_for_calls(1)
        pool.submit(sync.wait, covered).result(timeout=10)
        assert not later.done()
        held.released.set()
        later.result(timeout=10)


def test_a_postponed_block_leaves_its_sync_to_whoever_waits_later(
    sqlite_file_storage: Storage,
) -> None:
    """A batch thread's block: its commits return unsynced, the block too, and the
    wait, from another thread, syncs them all at once."""
    sync = wal_sync(sqlite_file_storage)
    before = sync.syncs
    with sqlite_file_storage.durable_later() as pending:
        put(sqlite_file_storage, "a")
        put(sqlite_file_storage, "b")
    assert (sync.syncs, pending.pending) == (before, True)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(pending.wait).result(timeout=10)
    assert (sync.syncs, pending.pending) == (before + 1, False)
    pending.wait()  # nothing left: no second sync
    assert sync.syncs == before + 1


def test_a_postponed_commit_synced_by_a_later_writer_is_no_longer_pending(
    sqlite_file_storage: Storage,
) -> None:
    sync = wal_sync(sqlite_file_storage)
    with sqlite_file_storage.durable_later() as pending:
        put(sqlite_file_storage, "a")
    put(sqlite_file_storage, "b")  # its own sync covers "a", committed before it
    before = sync.syncs
    assert not pending.pending
    pending.wait()
    assert sync.syncs == before


def test_a_postponed_block_inside_a_deferred_one_is_refused(
    sqlite_file_storage: Storage,
) -> None:
    """The outer block would wait for commits it never saw, or the other way round."""
    refused = pytest.raises(RuntimeError, match="postponed")
    with deferred(), refused, sqlite_file_storage.durable_later():
        pass
    refused = pytest.raises(RuntimeError, match="postponed")
    with sqlite_file_storage.durable_later(), refused, sqlite_file_storage.durable_later():
        pass
    with sqlite_file_storage.durable_later() as pending:  # left usable
        put(sqlite_file_storage, "a")
    pending.wait()
