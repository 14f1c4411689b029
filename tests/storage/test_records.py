"""`evolve`: dataclasses.replace for the hot records, field for field."""

import dataclasses

import pytest

from arbiter.storage.records import RunRecord, TaskRecord, evolve
from tests.domain.runs.support import run_record


def task_record() -> TaskRecord:
    return TaskRecord(
        **{
            spec.name: (f"value-{spec.name}" if spec.type == "str" else 0)
            for spec in dataclasses.fields(TaskRecord)
        }
    )


@pytest.mark.parametrize("record", [run_record(), task_record()], ids=["run", "task"])
def test_evolve_is_replace_for_every_field(record: RunRecord | TaskRecord) -> None:
    for spec in dataclasses.fields(record):
        new_value = object()
        evolved = evolve(record, **{spec.name: new_value})
        assert evolved == dataclasses.replace(record, **{spec.name: new_value})
        assert type(evolved) is type(record)
        assert getattr(evolved, spec.name) is new_value
        assert getattr(record, spec.name) is not new_value  # the original is untouched
    assert evolve(record) == record
    assert evolve(record) is not record


def test_evolve_refuses_a_field_the_record_lacks() -> None:
    with pytest.raises(TypeError, match="nonsense"):
        evolve(run_record(), nonsense=1)
