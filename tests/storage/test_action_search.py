"""Searching the log by column conditions: NULL is a value, strings order by
code point on both backends, Python checks run on the rows SQL leaves."""

from dataclasses import fields
from typing import Any

import pytest

from arbiter.storage import Storage
from arbiter.storage.action_search import (
    ALWAYS,
    NEVER,
    ActionSearch,
    AllOf,
    AnyOf,
    Check,
    Compare,
    Condition,
    OneOf,
    SearchTooLong,
)
from arbiter.storage.base import NewAction
from arbiter.storage.records import ActionRecord
from arbiter.storage.schema import actions
from tests.storage.support import T0

ROWS: list[dict[str, Any]] = [
    {"username": "alice", "worker": None, "task_id": None},
    {"username": "Bob", "worker": "w-1", "task_id": 3},
    {"username": "bob", "worker": "w-2", "task_id": 0},
    {"username": "Émile", "worker": None, "task_id": 7, "data": {"nn": "nn-1.nnue"}},
]


@pytest.fixture
def ids(storage: Storage) -> list[int]:
    added = []
    with storage.write() as tx:
        for index, row in enumerate(ROWS):
            added.append(tx.actions.add(NewAction(time=T0 + index, action="log_message", **row)))
    return added


def found(storage: Storage, where: Condition, **options: Any) -> list[int]:
    with storage.read() as tx:
        return [record.id for record in tx.actions.search(ActionSearch(where=where, **options))]


def test_negation_keeps_null_rows_unless_null_is_named(storage: Storage, ids: list[int]) -> None:
    assert found(storage, OneOf("worker", ("w-1",), negated=True)) == [ids[0], ids[2], ids[3]]
    assert found(storage, OneOf("worker", ("w-1", None), negated=True)) == [ids[2]]
    assert found(storage, OneOf("worker", (None,))) == [ids[0], ids[3]]
    assert found(storage, OneOf("task_id", (0, 7, None))) == [ids[0], ids[2], ids[3]]
    assert found(storage, OneOf("task_id", (), negated=True)) == ids


def test_strings_order_by_code_point(storage: Storage, ids: list[int]) -> None:
    # "B" < "a" < "b" < "É" whatever the database's collation says.
    assert found(storage, Compare("username", "<", "a")) == [ids[1]]
    assert found(storage, Compare("username", ">", "bob")) == [ids[3]]
    assert found(storage, Compare("task_id", ">=", 3)) == [ids[1], ids[3]]


def test_a_value_inside_data(storage: Storage, ids: list[int]) -> None:
    assert found(storage, OneOf("data.nn", ("nn-1.nnue",))) == [ids[3]]
    assert found(storage, OneOf("data.nn", (None,))) == ids[:3]


def test_checks_run_on_what_sql_leaves(storage: Storage, ids: list[int]) -> None:
    seen: list[str] = []

    def lowercase(record: Any) -> bool:
        seen.append(record.username)
        return bool(record.username.islower())

    where = AllOf((Compare("task_id", ">=", 0), Check(lowercase)))
    assert found(storage, where) == [ids[2]]
    assert seen == ["Bob", "bob", "Émile"]
    either = AnyOf((OneOf("worker", ("w-1",)), Check(lambda record: record.task_id == 7)))
    assert found(storage, either) == [ids[1], ids[3]]


def test_order_limit_and_constants(storage: Storage, ids: list[int]) -> None:
    assert found(storage, ALWAYS, limit=2) == ids[:2]
    assert found(storage, ALWAYS, limit=2, newest_first=True) == [ids[3], ids[2]]
    assert found(storage, NEVER) == []
    assert found(storage, Check(lambda _record: True), limit=3) == ids[:3]


def test_checks_give_up_past_their_budget(storage: Storage, ids: list[int]) -> None:
    with pytest.raises(SearchTooLong):
        found(storage, Check(lambda _record: False), scan_seconds=0.0)


def test_rows_become_records_by_position() -> None:
    """The search builds records from rows by position: the orders must agree."""
    assert [column.name for column in actions.columns] == [f.name for f in fields(ActionRecord)]
