"""Start-up: aggregates recomputed from tasks, leases given a grace period."""

import threading

from arbiter.domain.accounts import User
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.records import evolve
from tests.domain.runs.support import Clock, approved_run, pairs, take_task, worker


def restart(storage: Storage, clock: Clock) -> Runs:
    fresh = Runs(storage, task_gate=threading.Semaphore(5), clock=clock)
    fresh.restore()
    return fresh


def test_wrong_aggregates_are_fixed_and_logged(
    runs: Runs,
    alice: User,
    root: User,
    repo_url: str,
    storage: Storage,
    clock: Clock,
    caplog: object,
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    task_id = take_task(runs, alice, worker())["task_id"]
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=4))
    with storage.write() as tx:
        run = tx.runs.get(run_id)
        assert run is not None
        tx.runs.save(evolve(run, wins=999, workers=7))
    again = restart(storage, clock)
    state = again.context.registry.get(run_id)
    assert state is not None
    assert (state.run.wins, state.run.workers, state.run.draws) == (0, 1, 8)
    with storage.read() as tx:
        fixed = tx.runs.get(run_id)
    assert fixed is not None
    assert fixed.wins == 0


def test_downtime_reclaims_nothing(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage, clock: Clock
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    task_id = take_task(runs, alice, worker())["task_id"]
    clock.advance(3600)  # the server was down for an hour
    again = restart(storage, clock)
    assert again.scavenge() == 0
    assert again.ingest.beat(worker(), run_id, task_id) == {"task_alive": True}
    clock.advance(400)
    assert again.scavenge() == 1
