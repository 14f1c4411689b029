"""The run state's records: `evolve`, their columns, and the collector never walking them."""

import gc

import msgspec
import pytest

from arbiter.storage.records import (
    NetRecord,
    RunRecord,
    TaskRecord,
    column_names,
    evolve,
)
from tests.domain.runs.support import run_record, task_record


@pytest.mark.parametrize("record", [run_record(), task_record()], ids=["run", "task"])
def test_evolve_changes_only_the_fields_named(record: RunRecord | TaskRecord) -> None:
    for name in column_names(type(record)):
        new_value = object()
        evolved = evolve(record, **{name: new_value})
        assert type(evolved) is type(record)
        assert getattr(evolved, name) is new_value
        assert getattr(record, name) is not new_value  # the original is untouched
        others = [other for other in column_names(type(record)) if other != name]
        assert all(getattr(evolved, other) is getattr(record, other) for other in others)
    assert evolve(record) == record
    assert evolve(record) is not record


def test_evolve_refuses_a_field_the_record_lacks() -> None:
    with pytest.raises(TypeError, match="nonsense"):
        evolve(run_record(), nonsense=1)


def test_column_names_are_the_fields_in_order_for_structs_and_dataclasses() -> None:
    assert column_names(TaskRecord)[:3] == ("run_id", "task_id", "num_games")
    assert column_names(RunRecord)[-1] == "results_history"
    assert column_names(NetRecord)[:2] == ("name", "username")


@pytest.mark.parametrize("record", [run_record(), task_record()], ids=["run", "task"])
def test_the_collector_never_tracks_a_run_or_task_record(record: RunRecord | TaskRecord) -> None:
    assert not gc.is_tracked(record)
    assert not gc.is_tracked(evolve(record, last_updated=1.0))


def test_a_records_pentanomial_is_a_tuple_the_collector_lets_go_of() -> None:
    task = evolve(task_record(), pentanomial=tuple(range(1, 6)))  # built, not a constant
    gc.collect()
    assert not gc.is_tracked(task.pentanomial)


def test_records_are_immutable() -> None:
    with pytest.raises(AttributeError):
        task_record().wins = 3  # type: ignore[misc]
    assert isinstance(task_record(), msgspec.Struct)
