"""The contributors table (all time, 30 days) and the machines at work."""

from arbiter.domain.accounts import User
from arbiter.domain.runs.contributors import CACHE_SECONDS, MONTH_SECONDS
from arbiter.domain.runs.queries import remaining_cpu_hours
from arbiter.domain.runs.service import Runs
from tests.domain.runs.support import Clock, approved_run, pairs, take_task, worker


def play(runs: Runs, user: User, run_id: str, key: str, games_pairs: int) -> int:
    task_id = take_task(runs, user, worker(user.username, key=key))["task_id"]
    runs.ingest.update_task(worker(user.username, key=key), run_id, task_id, pairs(dd=games_pairs))
    return int(task_id)


def test_contributors_count_games_cpu_hours_and_tests(
    runs: Runs, clock: Clock, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    play(runs, alice, run_id, "abcd", 50)
    (row,) = runs.contributors.table()
    assert (row.username, row.games, row.tests) == ("alice", 100, 1)
    # 10+0.1: (10 + 68·0.1)·2·0.92 s per game, one thread
    assert abs(row.cpu_hours - 100 * (10 + 6.8) * 2 * 0.92 / 3600) < 1e-9
    assert row.games_per_hour > 0
    assert row.last_active == clock.now


def test_the_monthly_table_leaves_old_work_out_and_tables_are_cached(
    runs: Runs, clock: Clock, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    play(runs, alice, run_id, "abcd", 50)
    clock.advance(MONTH_SECONDS + 1)
    assert runs.contributors.table(last_month=True) == []
    assert [c.username for c in runs.contributors.table()] == ["alice"]
    play(runs, root, run_id, "ef01", 10)
    assert [c.username for c in runs.contributors.table()] == ["alice"]  # cached
    clock.advance(CACHE_SECONDS)
    assert [c.username for c in runs.contributors.table(last_month=True)] == ["root"]


def test_machines_lists_workers_holding_a_task(
    runs: Runs, clock: Clock, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    task_id = play(runs, alice, run_id, "abcd", 5)
    (machine,) = runs.queries.machines()
    assert (machine.task.run_id, machine.task.task_id) == (run_id, task_id)
    assert machine.run_title == "patch vs master"
    assert machine.last_seen == clock.now


def test_machines_on_a_secondary_come_from_storage(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    import threading

    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    play(runs, alice, run_id, "abcd", 5)
    reader = Runs(runs.context.storage, task_gate=threading.Semaphore(5))
    assert [m.task.run_id for m in reader.queries.machines()] == [run_id]


def test_the_queue_estimate_of_an_sprt_is_its_expected_length(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    sprt = runs.queries.run(approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 2}))
    fixed = runs.queries.run(approved_run(runs, alice, root, repo_url, num_games=2000))
    per_game = (10 + 6.8) * 2 * 0.92 / 3600
    assert abs(remaining_cpu_hours(fixed) - 2000 * per_game) < 1e-9
    assert 100_000 * per_game < remaining_cpu_hours(sprt) < 200_000 * per_game
    overview = runs.queries.overview()
    assert overview.queued_cpu_hours > 0
    assert overview.queue_hours is None  # no cores at work
