"""A finished run's χ² summary is kept: the first view stores it, later views
read it, new results make it anew, and an import's pass gives what views give;
on both backends."""

import math

import pytest

from arbiter.domain.runs import chi2_summaries
from arbiter.domain.runs.queries import chi2_of
from arbiter.stats.purge import Chi2Result
from arbiter.storage import Storage
from arbiter.storage.records import RunRecord, TaskRecord, evolve
from tests.domain.runs.support import run_record, task_record

RUN = "d" * 24
SMALL_RUN = "e" * 24


def tasks_of(run_id: str, count: int) -> list[TaskRecord]:
    """One machine a task, one of them far from the rest."""
    made = []
    for task_id in range(count):
        pairs = (0, 1, 5, 10, 9) if task_id == 0 else (3, 6 + task_id % 3, 8, 6, 3)
        made.append(
            task_record(
                run_id=run_id,
                task_id=task_id,
                active=False,
                worker_name=f"user{task_id}-1cores-{task_id:08x}",
                pentanomial=pairs,
            )
        )
    return made


def stored_run(storage: Storage, run: RunRecord, tasks: list[TaskRecord]) -> None:
    with storage.write() as tx:
        tx.runs.add(run)
        tx.tasks.add_many(tasks)


def kept_stamp(storage: Storage, run_id: str) -> str | None:
    with storage.read() as tx:
        stored = tx.chi2.get(run_id)
    return None if stored is None else stored.stamp


def same(found: Chi2Result, expected: Chi2Result) -> None:
    assert (found.dof, found.excluded) == (expected.dof, expected.excluded)
    assert found.chi2 == pytest.approx(expected.chi2)
    assert found.residual == pytest.approx(expected.residual)


def test_the_first_view_keeps_a_finished_runs_summary(storage: Storage) -> None:
    run, tasks = run_record(id=RUN, finished=True, last_updated=5.0), tasks_of(RUN, 12)
    stored_run(storage, run, tasks)
    first = chi2_summaries.stored_or_computed(storage, run)
    same(first, chi2_of(tasks))
    assert first.residual[tasks[0].worker_name] > 3.0
    assert kept_stamp(storage, RUN) == chi2_summaries.stamp_of(run)
    with storage.read() as tx:
        assert chi2_summaries.kept(tx, run) == first  # read back exactly


def test_new_results_make_the_summary_anew(storage: Storage) -> None:
    run, tasks = run_record(id=RUN, finished=True, last_updated=5.0), tasks_of(RUN, 12)
    stored_run(storage, run, tasks)
    chi2_summaries.stored_or_computed(storage, run)
    purged = evolve(tasks[0], bad=True)
    with storage.write() as tx:
        tx.tasks.save(purged)
    changed = evolve(run, last_updated=6.0, wins=run.wins + 1)
    with storage.read() as tx:
        assert chi2_summaries.kept(tx, changed) is None  # the stamp no longer matches
    again = chi2_summaries.stored_or_computed(storage, changed)
    same(again, chi2_of([purged, *tasks[1:]]))
    assert tasks[0].worker_name not in again.residual
    assert kept_stamp(storage, RUN) == chi2_summaries.stamp_of(changed)


def test_a_live_runs_summary_is_not_kept(storage: Storage) -> None:
    run, tasks = run_record(id=RUN, last_updated=5.0), tasks_of(RUN, 12)
    stored_run(storage, run, tasks)
    same(chi2_summaries.stored_or_computed(storage, run), chi2_of(tasks))
    assert kept_stamp(storage, RUN) is None


def test_an_infinite_residual_survives_the_document() -> None:
    result = Chi2Result(3.5, 4, 0.25, {"a": math.inf, "b": 0.5}, frozenset({"c"}))
    document = chi2_summaries.to_document(result)
    assert document["residual"]["a"] is None
    assert chi2_summaries.from_document(document) == result


def test_the_import_pass_keeps_what_a_view_would(storage: Storage) -> None:
    big = run_record(id=RUN, finished=True, last_updated=5.0)
    stored_run(storage, big, tasks_of(RUN, 12))
    stored_run(storage, run_record(id=SMALL_RUN, finished=True), tasks_of(SMALL_RUN, 3))
    live = run_record(id="f" * 24)
    stored_run(storage, live, tasks_of(live.id, 12))
    assert chi2_summaries.score_large_runs(storage, at_least=10) == 1
    assert kept_stamp(storage, SMALL_RUN) is None  # small: its first view scores it
    assert kept_stamp(storage, live.id) is None  # live: still changing
    with storage.read() as tx:
        by_import = tx.chi2.get(RUN)
        assert by_import is not None
    with storage.write() as tx:
        tx.connection.exec_driver_sql("DELETE FROM run_chi2")
    chi2_summaries.stored_or_computed(storage, big)
    with storage.read() as tx:
        assert tx.chi2.get(RUN) == by_import
    assert chi2_summaries.score_large_runs(storage, at_least=10) == 0  # already kept
