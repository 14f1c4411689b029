"""update_task and friends: durable, idempotent, strict about inconsistent stats."""

import threading

import pytest

from arbiter.domain.accounts import User
from arbiter.domain.errors import BadRequest, Unauthorized
from arbiter.domain.runs.service import Runs
from arbiter.protocol.messages import Stats
from arbiter.storage import Storage
from tests.domain.runs.support import Clock, approved_run, pairs, take_task, worker


def stored(storage: Storage, run_id: str) -> tuple[object, list[object]]:
    with storage.read() as tx:
        return tx.runs.get(run_id), tx.tasks.for_run(run_id)  # type: ignore[return-value]


@pytest.fixture
def started(runs: Runs, alice: User, root: User, repo_url: str) -> tuple[str, int]:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    return run_id, take_task(runs, alice, worker())["task_id"]


def test_update_is_committed_before_the_reply(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    reply = runs.ingest.update_task(worker(), run_id, task_id, pairs(ld=3, dd=7, wd=5, ww=1))
    assert reply == {"task_alive": True}
    run, tasks = stored(storage, run_id)
    assert (run.wins, run.losses, run.draws) == (7, 3, 22)  # type: ignore[attr-defined]
    assert tasks[0].pentanomial == [0, 3, 7, 5, 1]  # type: ignore[attr-defined]


def test_repeated_update_changes_nothing(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    stats = pairs(ld=3, dd=7, wd=5, ww=1)
    runs.ingest.update_task(worker(), run_id, task_id, stats)
    before = stored(storage, run_id)
    assert runs.ingest.update_task(worker(), run_id, task_id, stats) == {"task_alive": True}
    assert stored(storage, run_id) == before


def test_going_backwards_kills_the_task(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=10))
    reply = runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=8))
    assert reply["task_alive"] is False
    assert "incompatible stats" in reply["error"]
    run, tasks = stored(storage, run_id)
    assert not tasks[0].active  # type: ignore[attr-defined]
    assert run.draws == 20  # type: ignore[attr-defined]


def test_inconsistent_counts_are_a_bad_request_that_changes_nothing(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=2))
    before = stored(storage, run_id)
    odd = Stats(1, 0, 4, 0, 0, [0, 0, 2, 0, 0])
    with pytest.raises(BadRequest, match="incompatible stats: odd number of games"):
        runs.ingest.update_task(worker(), run_id, task_id, odd)
    assert stored(storage, run_id) == before
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert state.tasks[task_id].active


def test_other_workers_task_is_a_bad_request(runs: Runs, started: tuple[str, int]) -> None:
    run_id, task_id = started
    with pytest.raises(BadRequest, match="Invalid unique_key"):
        runs.ingest.update_task(worker(key="zzzz"), run_id, task_id, pairs(dd=1))
    with pytest.raises(BadRequest, match="Invalid task_id"):
        runs.ingest.update_task(worker(), run_id, 99, pairs(dd=1))
    with pytest.raises(BadRequest, match="Invalid run_id"):
        runs.ingest.update_task(worker(), "0" * 24, 0, pairs(dd=1))


def test_a_task_belongs_to_its_account_in_any_spelling(
    runs: Runs, alice: User, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    reply = runs.ingest.update_task(worker("ALICE"), run_id, task_id, pairs(dd=1))
    assert reply == {"task_alive": True}
    with pytest.raises(BadRequest, match="Invalid unique_key"):
        runs.ingest.update_task(worker("bob"), run_id, task_id, pairs(dd=1))
    runs.lifecycle.stop(alice, run_id)  # then answered from storage
    assert runs.ingest.beat(worker("Alice"), run_id, task_id)["task_alive"] is False
    with pytest.raises(BadRequest, match="Invalid unique_key"):
        runs.ingest.beat(worker("bob"), run_id, task_id)


def test_completed_task_is_no_longer_alive(runs: Runs, started: tuple[str, int]) -> None:
    run_id, task_id = started
    state = runs.context.registry.get(run_id)
    assert state is not None
    size = state.tasks[task_id].num_games
    reply = runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=size // 2))
    assert reply == {"task_alive": False}
    assert runs.ingest.beat(worker(), run_id, task_id)["task_alive"] is False


def test_fixed_games_run_finishes_when_every_game_is_played(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    played = 0
    key = 0
    while played < 2000:
        key += 1
        info = worker(key=f"k{key:03d}")
        reply = take_task(runs, alice, info)
        size = reply["run"]["my_task"]["num_games"]
        runs.ingest.update_task(info, run_id, reply["task_id"], pairs(wd=size // 2))
        played += size
    run, _tasks = stored(storage, run_id)
    assert run.finished
    assert run.is_green
    assert run.workers == 0  # type: ignore[attr-defined]


def test_sprt_accepts_and_finishes(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 2})
    for key in range(40):
        info = worker(key=f"s{key:03d}", concurrency=8)
        reply = runs.scheduler.request_task(info, alice, f"10.0.0.{key}")
        if "task_id" not in reply:
            break
        half = reply["run"]["my_task"]["num_games"] // 2
        runs.ingest.update_task(
            info, run_id, reply["task_id"], pairs(dd=half // 2, ww=half - half // 2)
        )
    run, _tasks = stored(storage, run_id)
    assert run.finished  # type: ignore[attr-defined]
    assert run.is_green  # type: ignore[attr-defined]
    assert run.args["sprt"]["state"] == "accepted"  # type: ignore[attr-defined]
    assert run.workers == 0  # type: ignore[attr-defined]


def test_failed_task_frees_its_games(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=5))
    assert runs.ingest.failed_task(worker(), run_id, task_id, "engine crashed") == {}
    run, _tasks = stored(storage, run_id)
    assert run.committed_games == 10
    assert run.workers == 0
    again = runs.ingest.failed_task(worker(), run_id, task_id, "again")
    assert again["task_alive"] is False


def test_stop_run_needs_cpu_hours(runs: Runs, storage: Storage, started: tuple[str, int]) -> None:
    run_id, task_id = started
    with pytest.raises(Unauthorized, match="too few CPU hours"):
        runs.ingest.stop_run(worker(), run_id, task_id, "bad bench", cpu_hours=3.0)
    run, tasks = stored(storage, run_id)
    assert not run.finished
    assert not tasks[0].active


def test_stop_run_by_a_trusted_worker_fails_the_run(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.stop_run(worker(), run_id, task_id, "illegal move", cpu_hours=5000.0)
    run, _ = stored(storage, run_id)
    assert run.finished
    assert run.failed
    assert run.failures == 1
    with pytest.raises(Unauthorized, match="already finished"):
        runs.ingest.stop_run(worker(), run_id, task_id, "again", cpu_hours=5000.0)


def test_dead_tasks_are_reclaimed_after_the_lease(
    runs: Runs, clock: Clock, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    clock.advance(300)
    runs.ingest.beat(worker(), run_id, task_id)
    clock.advance(300)
    assert runs.scavenge() == 0
    clock.advance(100)
    assert runs.scavenge() == 1
    run, tasks = stored(storage, run_id)
    assert not tasks[0].active
    assert run.workers == 0


def test_worker_log_checks_ownership(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    assert runs.ingest.worker_log(worker(), "hello", run_id, task_id) == {}
    with pytest.raises(BadRequest):
        runs.ingest.worker_log(worker(key="zzzz"), "hello", run_id, task_id)


def test_a_beat_does_not_wait_for_the_run_lock(runs: Runs, started: tuple[str, int]) -> None:
    """Beats are answered while a result commit holds the run (and on the event loop)."""
    run_id, task_id = started
    holder_ready, release = threading.Event(), threading.Event()

    def hold_the_run() -> None:
        with runs.context.locked(run_id):
            holder_ready.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_run)
    holder.start()
    try:
        assert holder_ready.wait(10)
        assert runs.ingest.beat_live(worker(), run_id, task_id) == {"task_alive": True}
    finally:
        release.set()
        holder.join()


def test_a_beat_for_a_run_not_in_memory_is_answered_from_storage(
    runs: Runs, alice: User, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.lifecycle.stop(alice, run_id)
    assert runs.ingest.beat_live(worker(), run_id, task_id) is None
    assert runs.ingest.beat(worker(), run_id, task_id)["task_alive"] is False
    with pytest.raises(BadRequest):
        runs.ingest.beat(worker(key="zzzz"), run_id, task_id)


def test_results_keep_the_workers_latest_measurements(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    """The official worker benches after request_task and sends its speed and CPU
    features with every update_task; the task keeps them, as the reference does."""
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=2))
    _, tasks = stored(storage, run_id)
    unchanged = tasks[0].worker_info  # type: ignore[attr-defined]
    measured = worker(nps=733216.0, ARCH="64bit BMI2")
    runs.ingest.update_task(measured, run_id, task_id, pairs(dd=4))
    _, tasks = stored(storage, run_id)
    info = tasks[0].worker_info  # type: ignore[attr-defined]
    assert (info["nps"], info["ARCH"]) == (733216.0, "64bit BMI2")
    assert info["remote_addr"] == unchanged["remote_addr"]  # what the server added stays
    assert {k: v for k, v in info.items() if k not in ("nps", "ARCH")} == {
        k: v for k, v in unchanged.items() if k not in ("nps", "ARCH")
    }
