"""Incremental run aggregates always equal the sum over tasks."""

from hypothesis import given
from hypothesis import strategies as st

from arbiter.domain.runs.totals import apply_change, differences, recompute
from arbiter.storage.records import TaskRecord, evolve
from tests.domain.runs.support import run_record, task_record

RUN = run_record(id="r" * 24, username="u", approver="a")


def task(task_id: int, active: bool, cores: int, counts: list[int]) -> TaskRecord:
    ll, ld, dd, wd, ww = counts
    return task_record(
        run_id=RUN.id,
        task_id=task_id,
        num_games=2 * sum(counts) + 10,
        active=active,
        worker_info={"concurrency": cores},
        wins=wd + 2 * ww,
        losses=ld + 2 * ll,
        draws=ld + 2 * dd + wd,
        pentanomial=tuple(counts),
    )


counts = st.lists(st.integers(0, 50), min_size=5, max_size=5)
step = st.tuples(st.integers(0, 4), st.booleans(), st.integers(1, 16), counts)


@given(st.lists(step, max_size=30))
def test_incremental_equals_recomputed(steps: list[tuple[int, bool, int, list[int]]]) -> None:
    run = RUN
    tasks: dict[int, TaskRecord] = {}
    for task_id, active, cores, values in steps:
        new = task(task_id, active, cores, values)
        run = apply_change(run, tasks.get(task_id), new)
        tasks[task_id] = new
    assert differences(run, recompute(RUN, list(tasks.values()))) == {}


def test_differences_name_the_fields() -> None:
    assert differences(RUN, evolve(RUN, wins=3)) == {"wins": (0, 3)}
