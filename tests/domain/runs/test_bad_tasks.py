"""Copies of purged tasks: the reference's bad_tasks, in its order, kept in storage."""

import pytest

from arbiter.domain.accounts import User
from arbiter.domain.errors import NotFound
from arbiter.domain.runs import bad_tasks
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.records import TaskRecord, evolve
from tests.domain.runs.support import approved_run, pairs, take_task, worker

RUN = "0123456789abcdef01234567"


def task(task_id: int, key: str, *, ww: int = 0, dd: int = 0, crashes: int = 0) -> TaskRecord:
    stats = pairs(dd=dd, ww=ww)
    return TaskRecord(
        run_id=RUN,
        task_id=task_id,
        num_games=200,
        start=200 * task_id,
        active=False,
        bad=False,
        last_updated=1_700_000_000.5,
        username="alice",
        worker_name=f"alice-4cores-{key}",
        unique_key=f"{key}-1234-5678-9abc-def012345678",
        remote_addr="10.0.0.1",
        worker_info={"username": "alice", "concurrency": 4},
        wins=stats.wins,
        losses=stats.losses,
        draws=stats.draws,
        crashes=crashes,
        time_losses=0,
        pentanomial=list(stats.pentanomial),
        residual=None,
        spsa_params=None,
    )


def test_copies_put_crashes_first_then_outliers_as_the_reference() -> None:
    tasks = [task(i, f"h{i:03d}", dd=40, ww=10) for i in range(6)]
    tasks[1] = task(1, "bad1", ww=50)  # wins everything: the χ² outlier
    tasks[4] = evolve(tasks[4], crashes=4)  # bad outright
    copies = bad_tasks.copies(tasks, [tasks[1], tasks[4]])
    assert [c["task_id"] for c in copies] == [4, 1]
    crashed, outlier = copies
    assert (crashed["residual"], crashed["residual_color"]) == (10.0, "red")
    assert outlier["residual"] > 7.0
    assert outlier["residual_color"] == "red"
    assert (outlier["bad"], outlier["active"]) == (True, False)
    assert outlier["stats"]["wins"] == 100  # the results it had, not zeros
    assert outlier["worker_info"]["unique_key"] == "bad1-123..."
    assert outlier["worker_info"]["remote_addr"] == "?.?.?.?"


def test_copies_append_in_order_of_purging(storage: Storage) -> None:
    with storage.write() as tx:
        bad_tasks.append(tx, RUN, [{"task_id": 3}])
    with storage.write() as tx:
        bad_tasks.append(tx, RUN, [{"task_id": 1}, {"task_id": 7}])
    with storage.read() as tx:
        found = [bad_tasks.get(tx, RUN, n) for n in range(4)]
        other = bad_tasks.get(tx, "f" * 24, 0)
    assert found == [{"task_id": 3}, {"task_id": 1}, {"task_id": 7}, None]
    assert other is None


def test_a_purge_keeps_what_it_took_out(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=100000)
    honest = [worker(key=f"h{i:03d}") for i in range(6)]
    cheat = worker(key="bad1")
    for info in [*honest, cheat]:
        task_id = take_task(runs, alice, info, addr=info.unique_key)["task_id"]
        stats = pairs(ww=90, ld=5, dd=5) if info is cheat else pairs(ll=10, ld=20, dd=40, wd=20)
        runs.ingest.update_task(info, run_id, task_id, stats)
    with pytest.raises(NotFound):
        runs.queries.get_bad_task(run_id, 0)
    assert runs.lifecycle.purge(root, run_id) == 1
    copy = runs.queries.get_bad_task(run_id, 0)
    assert copy["task_id"] == 6
    assert copy["stats"]["pentanomial"] == [0, 5, 5, 0, 90]
    assert runs.queries.get_task(run_id, 6)["stats"]["pentanomial"] == [0, 0, 0, 0, 0]
    with pytest.raises(NotFound, match="No purged task 1"):
        runs.queries.get_bad_task(run_id, 1)
