"""The worker block list: one row per short worker name, upserted."""

from arbiter.storage import Storage
from arbiter.storage.records import WorkerBlockRecord
from tests.storage.support import T0


def test_unknown_worker_is_none(storage: Storage) -> None:
    with storage.read() as tx:
        assert tx.worker_blocks.get("nobody-4cores") is None


def test_set_then_get(storage: Storage) -> None:
    with storage.write() as tx:
        tx.worker_blocks.set("alice-4cores", blocked=True, message="bad results", at=T0)
    with storage.read() as tx:
        assert tx.worker_blocks.get("alice-4cores") == WorkerBlockRecord(
            worker_name="alice-4cores", blocked=True, message="bad results", last_updated=T0
        )


def test_set_again_updates_the_same_row(storage: Storage) -> None:
    with storage.write() as tx:
        tx.worker_blocks.set("alice-4cores", blocked=True, message="bad", at=T0)
    with storage.write() as tx:
        tx.worker_blocks.set("alice-4cores", blocked=False, message="fixed", at=T0 + 60)
    with storage.read() as tx:
        assert tx.worker_blocks.get("alice-4cores") == WorkerBlockRecord(
            worker_name="alice-4cores", blocked=False, message="fixed", last_updated=T0 + 60
        )
        assert tx.worker_blocks.list_blocked() == []


def test_message_is_truncated_to_500_characters(storage: Storage) -> None:
    with storage.write() as tx:
        tx.worker_blocks.set("alice-4cores", blocked=True, message="x" * 600 + "tail", at=T0)
    with storage.read() as tx:
        record = tx.worker_blocks.get("alice-4cores")
    assert record is not None
    assert record.message == "x" * 500


def test_list_blocked_only_blocked_by_name(storage: Storage) -> None:
    with storage.write() as tx:
        tx.worker_blocks.set("carol-8cores", blocked=True, message="", at=T0)
        tx.worker_blocks.set("alice-4cores", blocked=True, message="", at=T0)
        tx.worker_blocks.set("bob-2cores", blocked=False, message="", at=T0)
    with storage.read() as tx:
        names = [record.worker_name for record in tx.worker_blocks.list_blocked()]
    assert names == ["alice-4cores", "carol-8cores"]
