"""The action store: append, then whitelisted queries, newest first."""

from typing import Any

import pytest
from sqlalchemy import insert

from arbiter.storage import Storage
from arbiter.storage.base import MAX_ACTIONS_PER_QUERY, ActionFilter, NewAction
from arbiter.storage.schema import actions
from tests.storage.support import T0


def _add(storage: Storage, **values: Any) -> int:
    fields: dict[str, Any] = {"time": T0, "action": "log_message", "username": "alice", **values}
    with storage.write() as tx:
        return tx.actions.add(NewAction(**fields))


def _ids(storage: Storage, action_filter: ActionFilter) -> list[int]:
    with storage.read() as tx:
        return [record.id for record in tx.actions.query(action_filter)]


def test_add_then_query_returns_every_field(storage: Storage) -> None:
    action_id = _add(
        storage,
        time=T0 + 1.5,
        action="failed_task",
        username="bob",
        message="it broke",
        run_id="a" * 24,
        run="master vs patch",
        task_id=7,
        worker="bob-4cores-abcd",
        user="carol",
        data={"k": 1},
    )
    with storage.read() as tx:
        [record] = tx.actions.query(ActionFilter())
    assert record.id == action_id
    assert record.time == T0 + 1.5
    assert record.action == "failed_task"
    assert record.username == "bob"
    assert record.message == "it broke"
    assert record.run_id == "a" * 24
    assert record.run == "master vs patch"
    assert record.task_id == 7
    assert record.worker == "bob-4cores-abcd"
    assert record.user == "carol"
    assert record.data == {"k": 1}


def test_optional_fields_default_to_empty(storage: Storage) -> None:
    _add(storage)
    with storage.read() as tx:
        [record] = tx.actions.query(ActionFilter())
    assert record.message == ""
    assert (record.run_id, record.run, record.task_id) == (None, None, None)
    assert (record.worker, record.user, record.data) == (None, None, None)


@pytest.mark.parametrize(
    "data",
    [
        {"nested": {"list": [1, 2.5, "three", None, True]}, "unicode": "é ♞ 中"},
        [1, [2, [3]]],
        "plain string",
        42,
        0.125,
        False,
    ],
)
def test_data_round_trips_as_json(storage: Storage, data: Any) -> None:
    _add(storage, data=data)
    with storage.read() as tx:
        [record] = tx.actions.query(ActionFilter())
    assert record.data == data


def test_newest_first(storage: Storage) -> None:
    middle = _add(storage, time=T0 + 2)
    oldest = _add(storage, time=T0 + 1)
    newest = _add(storage, time=T0 + 3)
    assert _ids(storage, ActionFilter()) == [newest, middle, oldest]


def test_same_time_is_ordered_by_id_newest_first(storage: Storage) -> None:
    first, second, third = (_add(storage, time=T0) for _ in range(3))
    assert _ids(storage, ActionFilter()) == [third, second, first]


def test_filter_by_action(storage: Storage) -> None:
    wanted = _add(storage, action="new_run")
    _add(storage, action="stop_run")
    assert _ids(storage, ActionFilter(action="new_run")) == [wanted]


def test_filter_by_username(storage: Storage) -> None:
    wanted = _add(storage, username="bob")
    _add(storage, username="alice")
    _add(storage, username="Bob")
    assert _ids(storage, ActionFilter(username="bob")) == [wanted]


def test_filter_by_run_id(storage: Storage) -> None:
    wanted = _add(storage, run_id="a" * 24)
    _add(storage, run_id="b" * 24)
    _add(storage)
    assert _ids(storage, ActionFilter(run_id="a" * 24)) == [wanted]


def test_before_is_exclusive(storage: Storage) -> None:
    earlier = _add(storage, time=T0 - 1)
    _add(storage, time=T0)
    _add(storage, time=T0 + 1)
    assert _ids(storage, ActionFilter(before=T0)) == [earlier]


def test_filters_combine(storage: Storage) -> None:
    wanted = _add(storage, action="new_run", username="bob", run_id="a" * 24, time=T0)
    _add(storage, action="new_run", username="bob", run_id="a" * 24, time=T0 + 5)
    _add(storage, action="new_run", username="alice", run_id="a" * 24, time=T0)
    _add(storage, action="stop_run", username="bob", run_id="a" * 24, time=T0)
    _add(storage, action="new_run", username="bob", run_id="b" * 24, time=T0)
    action_filter = ActionFilter(action="new_run", username="bob", run_id="a" * 24, before=T0 + 1)
    assert _ids(storage, action_filter) == [wanted]


def test_max_count_limits_to_the_newest(storage: Storage) -> None:
    added = [_add(storage, time=T0 + i) for i in range(5)]
    assert _ids(storage, ActionFilter(max_count=2)) == [added[4], added[3]]


@pytest.mark.parametrize(
    ("max_count", "limit"),
    [(-5, 1), (0, 1), (1, 1), (100, 100), (5000, 5000), (5001, 5000), (10**9, 5000)],
)
def test_filter_limit_is_clamped(max_count: int, limit: int) -> None:
    assert ActionFilter(max_count=max_count).limit == limit


def test_query_never_returns_more_than_the_cap(storage: Storage) -> None:
    rows = [
        {"time": T0 + i, "action": "log_message", "username": "alice", "message": ""}
        for i in range(MAX_ACTIONS_PER_QUERY + 1)
    ]
    with storage.write() as tx:
        tx.connection.execute(insert(actions), rows)
    with storage.read() as tx:
        assert len(tx.actions.query(ActionFilter(max_count=10**9))) == MAX_ACTIONS_PER_QUERY
        assert len(tx.actions.query(ActionFilter(max_count=0))) == 1
