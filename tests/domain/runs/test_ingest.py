"""update_task and friends: durable, idempotent, strict about inconsistent stats."""

import re
import threading
from collections.abc import Callable
from typing import Any

import pytest

from arbiter.domain.accounts import User
from arbiter.domain.actions import SYSTEM_USER, Actions
from arbiter.domain.errors import BadRequest, Unauthorized
from arbiter.domain.runs.documents import run_label
from arbiter.domain.runs.ingest import deactivate
from arbiter.domain.runs.registry import LEASE_SECONDS
from arbiter.domain.runs.service import Runs
from arbiter.protocol.messages import Stats
from arbiter.stats.sprt import update_sprt
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from tests.domain.runs.support import T0, Clock, approved_run, pairs, take_task, worker


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
    assert tasks[0].pentanomial == (0, 3, 7, 5, 1)  # type: ignore[attr-defined]


def test_repeated_update_changes_nothing(
    runs: Runs, clock: Clock, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    stats = with_faults(pairs(ld=3, dd=7, wd=5, ww=1), crashes=1, time_losses=1)
    runs.ingest.update_task(worker(), run_id, task_id, stats)
    before = stored(storage, run_id)
    clock.advance(60)  # a second write would show in last_updated
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
    assert run.args.sprt["state"] == "accepted"
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
    clock.advance(LEASE_SECONDS - 10)
    assert runs.ingest.beat(worker(), run_id, task_id) == {"task_alive": True}
    clock.advance(LEASE_SECONDS)
    assert runs.scavenge() == 0
    clock.advance(1)
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


def test_the_nps_measured_in_games_is_kept_once_sent_and_health_reads_it(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    """Arbiter's worker sends `game_nps` once it has measured it in the task's
    games; the task keeps it, and the machine's health record reads it beside
    the reported nps. A task never starts with one (it belongs to a task)."""
    run_id, task_id = started
    _, tasks = stored(storage, run_id)
    assert "game_nps" not in tasks[0].worker_info  # type: ignore[attr-defined]
    runs.ingest.update_task(worker(nps=1e6, game_nps=8e5), run_id, task_id, pairs(dd=2))
    runs.ingest.update_task(worker(nps=1e6), run_id, task_id, pairs(dd=4))
    _, tasks = stored(storage, run_id)
    assert tasks[0].worker_info["game_nps"] == 8e5  # type: ignore[attr-defined]
    with storage.read() as tx:
        (totals,) = tx.tasks.machine_run_totals([run_id])
    assert (totals.nps, totals.game_nps) == (1e6, 8e5)


def test_unchanged_measurements_keep_the_tasks_worker_info_object(
    runs: Runs, started: tuple[str, int]
) -> None:
    """The same speed and CPU features: the task keeps its very worker_info, so
    the update does not rewrite that column (storage sends only the fields that
    are not the stored row's objects)."""
    run_id, task_id = started
    state = runs.context.registry.get(run_id)
    assert state is not None
    before = state.tasks[task_id].worker_info
    assert runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=2))["task_alive"]
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert state.tasks[task_id].wins + state.tasks[task_id].draws == 4
    assert state.tasks[task_id].worker_info is before


# --- what each call writes to the audit log (pinned for mutation testing) ---

WORKER_NAME = "alice-4cores-abcd-1234"  # the long name of worker() (4 cores, key abcd-1234-...)


def logged(storage: Storage, run_id: str, action: str) -> list[dict[str, object]]:
    """The run's `action` entries, oldest first, as the API shows them (no `_id`)."""
    found = Actions(storage).list(ActionFilter(run_id=run_id, action=action))
    return [{k: v for k, v in entry.items() if k != "_id"} for entry in reversed(found)]


def about(run_id: str, task_id: int, **fields: object) -> dict[str, object]:
    """An action about task `task_id` of a run submitted with new_tag "patch"."""
    where = {"run_id": run_id, "run": run_label(run_id, "patch"), "task_id": task_id}
    return {"time": T0, "username": "alice", "worker": WORKER_NAME, **where, **fields}


def with_faults(stats: Stats, crashes: int = 0, time_losses: int = 0) -> Stats:
    return Stats(stats.wins, stats.losses, stats.draws, crashes, time_losses, stats.pentanomial)


def test_a_task_not_active_is_named_in_the_reply(runs: Runs, started: tuple[str, int]) -> None:
    run_id, task_id = started
    runs.ingest.failed_task(worker(), run_id, task_id, "gone")
    expected = {"task_alive": False, "info": f"task {run_id}/{task_id} is not active"}
    assert runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=1)) == expected
    assert runs.ingest.beat(worker(), run_id, task_id) == expected
    assert runs.ingest.failed_task(worker(), run_id, task_id, "again") == expected


def test_worker_log_records_the_message_its_worker_and_task(
    runs: Runs, alice: User, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.worker_log(worker(), "hello", run_id, task_id)
    runs.lifecycle.stop(alice, run_id)  # the label then comes from storage
    runs.ingest.worker_log(worker(), "again", run_id, task_id)
    runs.ingest.worker_log(worker(), "no task", run_id, None)  # names no task: no run either
    assert logged(storage, run_id, "worker_log") == [
        about(run_id, task_id, action="worker_log", message="hello"),
        about(run_id, task_id, action="worker_log", message="again"),
    ]
    loose = Actions(storage).list(ActionFilter(action="worker_log"))[0]
    assert {k: v for k, v in loose.items() if k != "_id"} == {
        "time": T0,
        "action": "worker_log",
        "username": "alice",
        "message": "no task",
        "worker": WORKER_NAME,
    }


def test_worker_log_refuses_a_task_the_worker_does_not_hold(
    runs: Runs, alice: User, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    with pytest.raises(BadRequest, match="Invalid task_id 5"):
        runs.ingest.worker_log(worker(), "hello", run_id, 5)
    runs.lifecycle.stop(alice, run_id)
    with pytest.raises(BadRequest, match="Invalid unique_key"):
        runs.ingest.worker_log(worker(key="zzzz"), "hello", run_id, task_id)
    with pytest.raises(BadRequest, match="Invalid task_id 5"):
        runs.ingest.worker_log(worker(), "hello", run_id, 5)


def test_failed_task_is_logged_with_its_worker(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=5))
    runs.ingest.failed_task(worker(), run_id, task_id, "engine crashed")
    assert logged(storage, run_id, "failed_task") == [
        about(run_id, task_id, action="failed_task", message="engine crashed")
    ]
    assert logged(storage, run_id, "crash_or_time") == []


def test_failed_task_with_too_many_crashes_says_so(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, with_faults(pairs(dd=20), 4, 5))
    runs.ingest.failed_task(worker(), run_id, task_id, "engine crashed")
    note = "Time losses:5(12.5%) Crashes:4(10.0%)"
    assert logged(storage, run_id, "crash_or_time") == [
        about(run_id, task_id, action="crash_or_time", message=note)
    ]
    _, tasks = stored(storage, run_id)
    assert tasks[0].spsa_params is None  # type: ignore[attr-defined]


def task_size(storage: Storage, run_id: str) -> int:
    size: int = stored(storage, run_id)[1][0].num_games  # type: ignore[attr-defined]
    return size


def test_a_task_completed_with_too_many_crashes_says_so(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    size = task_size(storage, run_id)
    reply = runs.ingest.update_task(worker(), run_id, task_id, with_faults(pairs(dd=size // 2), 4))
    assert reply == {"task_alive": False}
    note = f"Time losses:0(0.0%) Crashes:4({4 / size:.1%})"
    assert logged(storage, run_id, "crash_or_time") == [
        about(run_id, task_id, action="crash_or_time", message=note)
    ]


def test_a_task_completed_cleanly_logs_nothing(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    size = task_size(storage, run_id)
    runs.ingest.update_task(worker(), run_id, task_id, with_faults(pairs(dd=size // 2), 3))
    assert logged(storage, run_id, "crash_or_time") == []


def test_a_killed_task_is_logged_with_why(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=10))
    reply = runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=8))
    why = "incompatible stats: a cumulative count went down"
    assert reply == {"task_alive": False, "error": f"{run_id}/{task_id}: {why}"}
    assert logged(storage, run_id, "failed_task") == [
        about(run_id, task_id, action="failed_task", message=why)
    ]
    _, tasks = stored(storage, run_id)
    assert tasks[0].spsa_params is None  # type: ignore[attr-defined]


def test_a_task_is_killed_for_more_games_than_it_has(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    size = task_size(storage, run_id)
    reply = runs.ingest.update_task(worker(), run_id, task_id, pairs(ld=1, dd=size // 2))
    why = f"incompatible stats: {size + 2} games played in a task of {size}"
    assert reply == {"task_alive": False, "error": f"{run_id}/{task_id}: {why}"}
    run, tasks = stored(storage, run_id)
    assert run.draws == 0  # type: ignore[attr-defined]
    assert not tasks[0].active  # type: ignore[attr-defined]


def test_a_lost_worker_is_logged_by_the_name_it_had(
    runs: Runs, clock: Clock, storage: Storage, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    info = worker(concurrency=3, modified=True)
    task_id = take_task(runs, alice, info)["task_id"]
    clock.advance(LEASE_SECONDS + 1)
    assert runs.scavenge() == 1
    message = f"no heartbeat for more than {LEASE_SECONDS:.0f} s"
    fields = {"time": T0 + LEASE_SECONDS + 1, "worker": "alice-3cores-abcd-1234*"}
    assert logged(storage, run_id, "dead_task") == [
        about(run_id, task_id, action="dead_task", message=message, **fields)
    ]


def test_deactivate_takes_an_active_task_away_once(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    assert deactivate(runs.context, run_id, task_id, "stale") is True
    assert deactivate(runs.context, run_id, task_id, "stale") is False
    assert deactivate(runs.context, run_id, task_id + 1, "stale") is False
    assert deactivate(runs.context, "0" * 24, 0, "stale") is False
    assert logged(storage, run_id, "failed_task") == [
        about(run_id, task_id, action="failed_task", message="stale")
    ]
    run, tasks = stored(storage, run_id)
    assert not tasks[0].active  # type: ignore[attr-defined]
    assert run.workers == 0  # type: ignore[attr-defined]


def test_a_refused_stop_run_is_logged_and_frees_the_task(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    with pytest.raises(
        Unauthorized, match=f"User alice has too few CPU hours to stop run {run_id}"
    ):
        runs.ingest.stop_run(worker(), run_id, task_id, "bad bench", cpu_hours=999.9)
    refused = about(run_id, task_id, action="stop_run", message="bad bench (not authorized)")
    assert logged(storage, run_id, "stop_run") == [refused]
    with pytest.raises(Unauthorized):  # the task is gone already: logged again, nothing else
        runs.ingest.stop_run(worker(), run_id, task_id, "bad bench", cpu_hours=0.0)
    assert logged(storage, run_id, "stop_run") == [refused, refused]
    run, _tasks = stored(storage, run_id)
    assert not run.finished  # type: ignore[attr-defined]
    assert run.workers == 0  # type: ignore[attr-defined]


def test_a_stop_run_at_exactly_the_cpu_hours_needed_stops_it(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    assert runs.ingest.stop_run(worker(), run_id, task_id, "illegal move", cpu_hours=1000.0) == {}
    assert logged(storage, run_id, "stop_run") == [
        about(run_id, task_id, action="stop_run", message="illegal move")
    ]
    run, tasks = stored(storage, run_id)
    assert (run.finished, run.failed, run.failures) == (True, True, 1)  # type: ignore[attr-defined]
    assert not tasks[0].active  # type: ignore[attr-defined]


def test_an_update_stores_every_count_and_when(
    runs: Runs, clock: Clock, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    clock.advance(30)
    runs.ingest.update_task(worker(), run_id, task_id, with_faults(pairs(ld=1, wd=2), 2, 1))
    run, tasks = stored(storage, run_id)
    task = tasks[0]
    counts = (task.wins, task.losses, task.draws, task.crashes, task.time_losses)  # type: ignore[attr-defined]
    assert counts == (2, 1, 3, 2, 1)
    assert task.last_updated == T0 + 30  # type: ignore[attr-defined]
    assert (run.crashes, run.time_losses) == (2, 1)  # type: ignore[attr-defined]


def test_a_task_with_mixed_results_completes_at_its_size(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    half = task_size(storage, run_id) // 2
    reply = runs.ingest.update_task(
        worker(), run_id, task_id, pairs(ld=half // 2, wd=half - half // 2)
    )
    assert reply == {"task_alive": False}


def test_sprt_results_must_fill_whole_batches(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    sprt = {"elo0": 0, "elo1": 2, "batch_size": 4}
    run_id = approved_run(runs, alice, root, repo_url, sprt=sprt)
    task_id = take_task(runs, alice, worker())["task_id"]
    reply = runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=3))
    why = "incompatible stats: 3 game pairs is incompatible with the SPRT batch size of 4 pairs"
    assert reply == {"task_alive": False, "error": f"{run_id}/{task_id}: {why}"}
    run, _ = stored(storage, run_id)
    assert run.draws == 0  # type: ignore[attr-defined]


def test_a_bayeselo_sprt_is_computed_on_wins_draws_losses(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    sprt = {"elo0": 0, "elo1": 2, "elo_model": "BayesElo", "batch_size": 1}
    run_id = approved_run(runs, alice, root, repo_url, sprt=sprt)
    before = stored(storage, run_id)[0].args.sprt
    task_id = take_task(runs, alice, worker())["task_id"]
    stats = pairs(ld=1, dd=2, wd=3, ww=4)  # W 11, L 1, D 8
    runs.ingest.update_task(worker(), run_id, task_id, stats)
    after = stored(storage, run_id)[0].args.sprt
    expected = update_sprt(before, [1, 8, 11])
    assert after["llr"] == pytest.approx(expected["llr"])


@pytest.mark.parametrize("measured", [{"nps": 1.5e6}, {"ARCH": "64bit VNNI"}])
def test_either_measurement_alone_is_kept(
    runs: Runs, storage: Storage, started: tuple[str, int], measured: dict[str, Any]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(**measured), run_id, task_id, pairs(dd=2))
    info = stored(storage, run_id)[1][0].worker_info  # type: ignore[attr-defined]
    assert {k: info[k] for k in measured} == measured


def test_an_update_for_a_finished_run_is_answered_from_storage(
    runs: Runs, alice: User, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.lifecycle.stop(alice, run_id)
    expected = {"task_alive": False, "info": f"task {run_id}/{task_id} is not active"}
    assert runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=1)) == expected
    with pytest.raises(BadRequest, match=f"Invalid unique_key for task {run_id}/{task_id}"):
        runs.ingest.update_task(worker(key="zzzz"), run_id, task_id, pairs(dd=1))
    with pytest.raises(BadRequest, match=f"Invalid task_id 7 for run {run_id}"):
        runs.ingest.update_task(worker(), run_id, 7, pairs(dd=1))


def test_an_update_renews_the_lease(
    runs: Runs, clock: Clock, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    clock.advance(LEASE_SECONDS - 10)
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=1))
    clock.advance(LEASE_SECONDS - 10)
    assert runs.scavenge() == 0
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=1))  # the same again: renews too
    clock.advance(LEASE_SECONDS - 10)
    assert runs.scavenge() == 0
    clock.advance(20)
    assert runs.scavenge() == 1


SPSA = {"raw_params": "Alpha,100,0,200,10,0.0020", "A": 0.1, "alpha": 0.602, "gamma": 0.101}


@pytest.fixture
def spsa_started(runs: Runs, alice: User, root: User, repo_url: str) -> tuple[str, int]:
    run_id = approved_run(runs, alice, root, repo_url, num_games=10000, spsa=SPSA)
    return run_id, take_task(runs, alice, worker())["task_id"]


def test_request_spsa_keeps_the_flips_and_counts_the_task_once(
    runs: Runs, storage: Storage, spsa_started: tuple[str, int]
) -> None:
    run_id, task_id = spsa_started
    before, _ = stored(storage, run_id)
    assert runs.ingest.request_spsa(worker(), run_id, task_id)["task_alive"] is True
    run, tasks = stored(storage, run_id)
    assert tasks[0].spsa_params is not None  # type: ignore[attr-defined]
    assert run == before


def fail(runs: Runs, run_id: str, task_id: int) -> None:
    runs.ingest.failed_task(worker(), run_id, task_id, "engine crashed")


def stop_unauthorized(runs: Runs, run_id: str, task_id: int) -> None:
    with pytest.raises(Unauthorized):
        runs.ingest.stop_run(worker(), run_id, task_id, "bad bench", cpu_hours=0.0)


def reclaim(runs: Runs, run_id: str, task_id: int) -> None:
    assert deactivate(runs.context, run_id, task_id, "stale")


def kill(runs: Runs, run_id: str, task_id: int) -> None:
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=2))
    assert runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=1))["task_alive"] is False


Retire = Callable[[Runs, str, int], None]


@pytest.mark.parametrize("retire", [fail, stop_unauthorized, reclaim, kill])
def test_a_task_taken_away_drops_its_spsa_flips(
    runs: Runs, storage: Storage, spsa_started: tuple[str, int], retire: Retire
) -> None:
    run_id, task_id = spsa_started
    runs.ingest.request_spsa(worker(), run_id, task_id)
    retire(runs, run_id, task_id)
    _, tasks = stored(storage, run_id)
    assert (tasks[0].active, tasks[0].spsa_params) == (False, None)  # type: ignore[attr-defined]


def test_request_spsa_for_a_task_no_longer_active(
    runs: Runs, alice: User, spsa_started: tuple[str, int]
) -> None:
    run_id, task_id = spsa_started
    expected = {"task_alive": False, "info": f"task {run_id}/{task_id} is not active"}
    fail(runs, run_id, task_id)
    assert runs.ingest.request_spsa(worker(), run_id, task_id) == expected
    runs.lifecycle.stop(alice, run_id)  # then answered from storage
    assert runs.ingest.request_spsa(worker(), run_id, task_id) == expected
    assert runs.ingest.failed_task(worker(), run_id, task_id, "again") == expected
    with pytest.raises(BadRequest, match=f"Invalid unique_key for task {run_id}/{task_id}"):
        runs.ingest.request_spsa(worker(key="zzzz"), run_id, task_id)
    with pytest.raises(BadRequest, match=f"Invalid task_id 9 for run {run_id}"):
        runs.ingest.failed_task(worker(), run_id, 9, "again")


def test_a_task_left_by_a_restarted_worker_is_logged_as_failed(
    runs: Runs, alice: User, storage: Storage, started: tuple[str, int]
) -> None:
    """The scheduler takes it away (retire_task, with the default action) when the
    same worker asks for a new task."""
    run_id, task_id = started
    take_task(runs, alice, worker())
    assert logged(storage, run_id, "failed_task") == [
        about(run_id, task_id, action="failed_task", message="Stale active task")
    ]


def test_a_decision_auto_purges_bad_tasks_and_the_run_goes_on(
    runs: Runs, alice: User, root: User, repo_url: str, clock: Clock, storage: Storage
) -> None:
    """The first task crashed 4 times in its 4 games and was given up; the update
    that plays the 8th game decides the run, which purges that task instead."""
    run_id = approved_run(runs, alice, root, repo_url, num_games=8, auto_purge=True)
    crashed = take_task(runs, alice, worker())["task_id"]
    runs.ingest.update_task(worker(), run_id, crashed, with_faults(pairs(dd=1, wd=1), 4))
    runs.ingest.failed_task(worker(), run_id, crashed, "crash")
    other = worker(key="efgh")
    task_id = take_task(runs, alice, other)["task_id"]
    clock.advance(5)
    assert runs.ingest.update_task(other, run_id, task_id, pairs(ww=2)) == {"task_alive": False}
    run, tasks = stored(storage, run_id)
    assert (run.wins, run.losses, run.draws, run.finished) == (4, 0, 0, False)  # type: ignore[attr-defined]
    assert tasks[crashed].bad  # type: ignore[attr-defined]
    assert logged(storage, run_id, "purge_run") == [
        {
            "time": T0 + 5,
            "action": "purge_run",
            "username": SYSTEM_USER,
            "message": "auto-purged 1 task(s)",
            "run_id": run_id,
            "run": run_label(run_id, "patch"),
        }
    ]


def test_every_contradiction_in_the_counts_is_named(runs: Runs, started: tuple[str, int]) -> None:
    run_id, task_id = started
    problems = [
        "odd number of games (1): games are played in pairs",
        "wins+losses+draws = 1 games but the pentanomial counts 0 pairs (0 games)",
        "wins-losses = 1 but the pentanomial implies 2*WW+WD-LD-2*LL = 0",
    ]
    expected = "incompatible stats: " + "; ".join(problems)
    with pytest.raises(BadRequest, match=f"^{re.escape(expected)}$"):
        runs.ingest.update_task(worker(), run_id, task_id, Stats(1, 0, 0, 0, 0, [0, 0, 0, 0, 0]))


def test_an_update_that_changes_only_the_crashes_is_stored(
    runs: Runs, storage: Storage, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=2))
    runs.ingest.update_task(worker(), run_id, task_id, with_faults(pairs(dd=2), crashes=1))
    runs.ingest.update_task(worker(), run_id, task_id, with_faults(pairs(dd=2), 1, 1))
    task = stored(storage, run_id)[1][0]
    assert (task.crashes, task.time_losses) == (1, 1)  # type: ignore[attr-defined]


def test_the_same_pairs_counted_otherwise_are_no_repeat(
    runs: Runs, started: tuple[str, int]
) -> None:
    """One DD/WL pair first sent as two draws, then as a win and a loss: the same
    pentanomial, but fewer draws, which is no repetition but a count going down."""
    run_id, task_id = started
    runs.ingest.update_task(worker(), run_id, task_id, pairs(dd=1))
    reply = runs.ingest.update_task(
        worker(), run_id, task_id, Stats(1, 1, 0, 0, 0, [0, 0, 1, 0, 0])
    )
    why = "incompatible stats: a cumulative count went down"
    assert reply == {"task_alive": False, "error": f"{run_id}/{task_id}: {why}"}


def test_the_first_task_id_past_the_last_is_a_bad_request(
    runs: Runs, started: tuple[str, int]
) -> None:
    run_id, task_id = started
    with pytest.raises(BadRequest, match=f"^Invalid task_id {task_id + 1} for run {run_id}$"):
        runs.ingest.update_task(worker(), run_id, task_id + 1, pairs(dd=1))


def test_a_normalized_sprt_is_computed_on_the_pentanomial(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 2, "batch_size": 1})
    before = stored(storage, run_id)[0].args.sprt
    task_id = take_task(runs, alice, worker())["task_id"]
    stats = pairs(ld=1, dd=2, wd=3, ww=4)
    reply = runs.ingest.update_task(worker(), run_id, task_id, stats)
    after = stored(storage, run_id)[0].args.sprt
    assert reply == {"task_alive": True, "llr": after["llr"]}  # the worker shows it
    assert after["llr"] == pytest.approx(update_sprt(before, list(stats.pentanomial))["llr"])
    assert after["llr"] != pytest.approx(update_sprt(before, [1, 8, 11])["llr"])
