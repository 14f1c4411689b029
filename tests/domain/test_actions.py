"""The audit log's domain side: validated names, bounded messages, the wire shape."""

from typing import Any

import pytest

from arbiter.domain.actions import ACTION_NAMES, MAX_MESSAGE, Actions, record, to_wire, wire_id
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter, NewAction
from arbiter.storage.records import ActionRecord
from tests.domain.support import T0


def stored_actions(storage: Storage) -> list[ActionRecord]:
    with storage.read() as tx:
        return tx.actions.query(ActionFilter(max_count=1000))


def test_record_appends_and_returns_the_id(storage: Storage) -> None:
    with storage.write() as tx:
        action_id = record(
            tx,
            NewAction(
                time=T0,
                action="block_worker",
                username="root",
                message="bad results",
                worker="alice-4cores",
                data={"blocked": True},
            ),
        )
    [action] = stored_actions(storage)
    assert action.id == action_id
    assert (action.action, action.username, action.worker) == (
        "block_worker",
        "root",
        "alice-4cores",
    )
    assert (action.message, action.data) == ("bad results", {"blocked": True})


def test_record_accepts_every_reference_action_name(storage: Storage) -> None:
    with storage.write() as tx:
        for name in sorted(ACTION_NAMES):
            record(tx, NewAction(time=T0, action=name, username="root"))
    assert sorted(action.action for action in stored_actions(storage)) == sorted(ACTION_NAMES)


@pytest.mark.parametrize("name", ["", "Accept_user", "drop_table", "new_run "])
def test_record_refuses_unknown_action_names(storage: Storage, name: str) -> None:
    with pytest.raises(ValueError, match="unknown action"), storage.write() as tx:
        record(tx, NewAction(time=T0, action=name, username="root"))
    assert stored_actions(storage) == []


@pytest.mark.parametrize(
    ("length", "kept"), [(0, 0), (MAX_MESSAGE, MAX_MESSAGE), (MAX_MESSAGE + 100, MAX_MESSAGE)]
)
def test_record_truncates_messages(storage: Storage, length: int, kept: int) -> None:
    assert MAX_MESSAGE == 5120
    with storage.write() as tx:
        record(tx, NewAction(time=T0, action="worker_log", username="alice", message="m" * length))
    [action] = stored_actions(storage)
    assert action.message == "m" * kept


def test_recorded_action_rolls_back_with_its_transaction(storage: Storage) -> None:
    def record_then_fail() -> None:
        with storage.write() as tx:
            record(tx, NewAction(time=T0, action="log_message", username="alice"))
            raise RuntimeError("the change failed")

    with pytest.raises(RuntimeError):
        record_then_fail()
    assert stored_actions(storage) == []


def _record(**overrides: Any) -> ActionRecord:
    values: dict[str, Any] = {
        "id": 42,
        "time": T0,
        "action": "new_run",
        "username": "alice",
        "run_id": None,
        "run": None,
        "task_id": None,
        "worker": None,
        "user": None,
        "message": "",
        "data": None,
        **overrides,
    }
    return ActionRecord(**values)


# T0 in hex, then the row id (42) in 16 hex digits: an ObjectId's form.
WIRE_ID = "6b49d200" + "000000000000002a"


def test_to_wire_leaves_absent_fields_out_but_keeps_the_message() -> None:
    assert to_wire(_record()) == {
        "_id": WIRE_ID,
        "time": T0,
        "action": "new_run",
        "username": "alice",
        "message": "",
    }


def test_wire_ids_are_24_hex_digits_that_sort_by_time() -> None:
    early, late = _record(time=T0 + 1, id=9), _record(time=T0 + 2, id=3)
    assert all(len(wire_id(a)) == 24 for a in (early, late))
    assert int(wire_id(early), 16) < int(wire_id(late), 16)
    assert wire_id(_record(id=2**40)) != wire_id(_record(id=2**40 + 1))


def test_to_wire_lifts_the_reference_keys_kept_in_data() -> None:
    wire = to_wire(_record(action="upload_nn", data={"nn": "nn-0123456789ab.nnue"}))
    assert wire["nn"] == "nn-0123456789ab.nnue"


def test_to_wire_with_every_field() -> None:
    action = _record(
        run_id="a" * 24,
        run="master vs patch",
        task_id=3,
        worker="alice-4cores",
        user="bob",
        message="hello",
        data={"k": [1]},
    )
    assert to_wire(action) == {
        "_id": WIRE_ID,
        "time": T0,
        "action": "new_run",
        "username": "alice",
        "run_id": "a" * 24,
        "run": "master vs patch",
        "task_id": 3,
        "worker": "alice-4cores",
        "user": "bob",
        "message": "hello",
        "data": {"k": [1]},
    }


def test_to_wire_keeps_falsy_values_that_are_present() -> None:
    wire = to_wire(_record(task_id=0, data={}))
    assert wire["task_id"] == 0
    assert wire["data"] == {}


def test_actions_list_returns_wire_dicts_newest_first(storage: Storage) -> None:
    with storage.write() as tx:
        first = record(tx, NewAction(time=T0, action="new_run", username="alice", run_id="a" * 24))
        second = record(
            tx, NewAction(time=T0 + 1, action="stop_run", username="bob", message="stop")
        )
    listed = Actions(storage).list(ActionFilter())
    assert listed == [
        {
            "_id": f"{int(T0 + 1):08x}{second:016x}",
            "time": T0 + 1,
            "action": "stop_run",
            "username": "bob",
            "message": "stop",
        },
        {
            "_id": f"{int(T0):08x}{first:016x}",
            "time": T0,
            "action": "new_run",
            "username": "alice",
            "message": "",
            "run_id": "a" * 24,
        },
    ]
    assert Actions(storage).list(ActionFilter(username="alice")) == listed[1:]
