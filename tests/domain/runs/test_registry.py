"""RunContext.commit: a change is written as what differs from the stored run; a
Change chains the saves of its tasks."""

from arbiter.domain.accounts import User
from arbiter.domain.runs.registry import Change
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.records import RunRecord, TaskRecord, evolve
from tests.domain.runs.support import (
    approved_run,
    pairs,
    run_record,
    take_task,
    task_record,
    worker,
)


def stored_run_and_task(storage: Storage, run_id: str, task_id: int) -> tuple[int, int]:
    with storage.read() as tx:
        run, task = tx.runs.get(run_id), tx.tasks.get(run_id, task_id)
    assert run is not None
    assert task is not None
    return run.failures, task.crashes


def run_with_a_task_changed_by_hand(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> tuple[str, int, RunRecord, TaskRecord]:
    """A run and its task, whose rows then get failures=41 and crashes=42 behind
    memory's back; returns them as they were before."""
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    task_id = take_task(runs, alice, worker())["task_id"]
    with storage.write() as tx:
        run, task = tx.runs.get(run_id), tx.tasks.get(run_id, task_id)
        assert run is not None
        assert task is not None
        tx.runs.save(evolve(run, failures=41))
        tx.tasks.save(evolve(task, crashes=42))
    return run_id, task_id, run, task


def test_a_commit_writes_only_the_fields_it_changed(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    """Columns the change left alone are not rewritten: a value put in the row
    behind memory's back (here, by hand) survives an assignment and a result."""
    run_id, task_id, _, _ = run_with_a_task_changed_by_hand(runs, alice, root, repo_url, storage)
    take_task(runs, alice, worker(key="other"), addr="10.0.0.2")
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=4))
    assert stored_run_and_task(storage, run_id, task_id) == (41, 42)
    with storage.read() as tx:
        stored = tx.runs.get(run_id)
        assert stored is not None
    assert (stored.draws, stored.workers) == (8, 2)


def test_a_save_without_the_stored_record_writes_every_field(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id, task_id, run, task = run_with_a_task_changed_by_hand(
        runs, alice, root, repo_url, storage
    )
    with storage.write() as tx:
        tx.runs.save(run)
        tx.tasks.save(task)
    assert stored_run_and_task(storage, run_id, task_id) == (0, 0)


def test_a_change_chains_the_saves_of_each_task() -> None:
    run = run_record(pentanomial=(0, 0, 0, 0, 0))
    first, second = task_record(task_id=0), task_record(task_id=1, unique_key="k2")
    change = Change(run)
    one = evolve(first, wins=1, draws=1, pentanomial=(0, 0, 0, 1, 0))
    change.save_task(change.current(first), one)
    change.save_task(change.current(second), evolve(second, losses=2, pentanomial=(1, 0, 0, 0, 0)))
    two = evolve(one, wins=3, draws=1, pentanomial=(0, 0, 0, 1, 1))
    change.save_task(change.current(first), two)
    assert change.current(first) is two
    assert [task.task_id for task in change.saved.values()] == [0, 1]
    assert (change.run.wins, change.run.losses, change.run.draws) == (3, 2, 1)
    assert change.run.pentanomial == (1, 0, 0, 1, 1)
