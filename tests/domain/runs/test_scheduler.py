"""request_task: admission gate, pre-checks, run choice, task sizing."""

import threading
from typing import Any

from arbiter.domain.accounts import User
from arbiter.domain.runs.ranking import NOT_APPROVED, TOO_MANY_THREADS
from arbiter.domain.runs.scheduler import RUN_LOCK_PATIENCE, TOO_BUSY, TaskScheduler
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from tests.domain.runs.support import approved_run, submit, take_task, worker


def test_no_runs_means_no_task(runs: Runs, alice: User) -> None:
    assert runs.scheduler.request_task(worker(), alice, "1.2.3.4") == {"task_waiting": False}


def test_unapproved_run_gets_no_worker_and_says_why(runs: Runs, alice: User, repo_url: str) -> None:
    run_id = submit(runs, alice, repo_url)
    assert runs.scheduler.request_task(worker(), alice, "1.2.3.4") == {"task_waiting": False}
    assert runs.queries.get_run(run_id)["why_no_workers"] == [NOT_APPROVED]


def test_task_is_sized_for_half_an_hour_in_whole_batches(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 2})
    reply = take_task(runs, alice, worker(concurrency=8))
    assert reply["run"]["_id"] == run_id
    assert reply["run"]["my_task"] == {
        "num_games": 480,
        "start": 0,
        "stats": {
            "wins": 0,
            "losses": 0,
            "draws": 0,
            "crashes": 0,
            "time_losses": 0,
            "pentanomial": [0, 0, 0, 0, 0],
        },
    }
    assert "book_sri" in reply["run"]["args"]
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert (state.run.workers, state.run.cores) == (1, 8)


def test_openings_of_tasks_do_not_overlap(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    approved_run(runs, alice, root, repo_url, num_games=2000)
    first = take_task(runs, alice, worker(key="aaaa"))
    second = take_task(runs, alice, worker(key="bbbb"))
    one, two = first["run"]["my_task"], second["run"]["my_task"]
    assert two["start"] == one["start"] + one["num_games"]


def test_too_many_threads_is_explained(runs: Runs, alice: User, root: User, repo_url: str) -> None:
    run_id = approved_run(runs, alice, root, repo_url, threads=8)
    assert "task_id" not in runs.scheduler.request_task(worker(concurrency=4), alice, "1.1.1.1")
    why = runs.queries.get_run(run_id)["why_no_workers"]
    assert why == [f"{TOO_MANY_THREADS} (1 request)"]


def test_higher_priority_first(runs: Runs, alice: User, root: User, repo_url: str) -> None:
    approved_run(runs, alice, root, repo_url)
    urgent = approved_run(runs, alice, root, repo_url)
    runs.lifecycle.modify(root, urgent, {"priority": 1})
    assert take_task(runs, alice, worker())["run"]["_id"] == urgent


def test_full_gate_answers_too_busy_at_once(storage: Storage, alice: User) -> None:
    gate = threading.Semaphore(0)
    runs = Runs(storage, task_gate=gate)
    scheduler: TaskScheduler = runs.scheduler
    assert scheduler.request_task(worker(), alice, "1.1.1.1") == {
        "task_waiting": False,
        "info": TOO_BUSY,
    }


def test_blocked_worker_is_refused(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    approved_run(runs, alice, root, repo_url)
    with storage.write() as tx:
        tx.worker_blocks.set("alice-4cores-abcd", blocked=True, message="bad book", at=0.0)
    reply = runs.scheduler.request_task(worker(), alice, "1.1.1.1")
    assert reply["task_waiting"] is False
    assert "/workers/alice-4cores-abcd" in reply["error"]
    assert "bad book" in reply["error"]


def test_second_live_process_with_the_same_name_is_refused(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    approved_run(runs, alice, root, repo_url)
    take_task(runs, alice, worker(key="abcd"))
    twin = worker(unique_key="abcd-9999-5678-9abc-def012345678")
    reply = runs.scheduler.request_task(twin, alice, "1.1.1.1")
    assert "already a worker running" in reply["error"]


def test_restarted_worker_replaces_its_stale_task(
    runs: Runs, alice: User, root: User, repo_url: str, clock: object
) -> None:
    run_id = approved_run(runs, alice, root, repo_url)
    take_task(runs, alice, worker())
    clock.advance(200)  # type: ignore[attr-defined]
    restarted = worker(unique_key="abcd-9999-5678-9abc-def012345678")
    take_task(runs, alice, restarted)
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert [t.active for t in state.tasks] == [False, True]
    assert state.run.workers == 1


def test_machine_limit_per_address(runs: Runs, alice: User, root: User, repo_url: str) -> None:
    approved_run(runs, alice, root, repo_url, num_games=100000)
    for i in range(alice.machine_limit):
        take_task(runs, alice, worker(key=f"m{i:03d}"), addr="9.9.9.9")
    reply = runs.scheduler.request_task(worker(key="last"), alice, "9.9.9.9")
    assert reply["error"] == "Machine limit reached for user alice."
    assert "task_id" in runs.scheduler.request_task(worker(key="else"), alice, "8.8.8.8")


def test_arch_filter_and_compiler_pin(runs: Runs, alice: User, root: User, repo_url: str) -> None:
    approved_run(runs, alice, root, repo_url, arch_filter="avx2", compiler="clang++")
    reply = runs.scheduler.request_task(worker(), alice, "1.1.1.1")
    assert "task_id" not in reply
    fitting = worker(worker_arch="x86-64-avx2", compiler="clang++")
    assert "task_id" in runs.scheduler.request_task(fitting, alice, "1.1.1.1")


def hold_lock(state_lock: Any) -> tuple[threading.Thread, threading.Event]:
    """Hold `state_lock` in another thread until the returned event is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with state_lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    return thread, release


def test_a_run_busy_committing_yields_to_the_next_run(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    ordinary = approved_run(runs, alice, root, repo_url)
    urgent = approved_run(runs, alice, root, repo_url)
    runs.lifecycle.modify(root, urgent, {"priority": 1})
    state = runs.context.registry.get(urgent)
    assert state is not None
    thread, release = hold_lock(state.lock)
    try:
        assert take_task(runs, alice, worker())["run"]["_id"] == ordinary
    finally:
        release.set()
        thread.join()
    assert take_task(runs, alice, worker(key="efgh"))["run"]["_id"] == urgent


def test_when_every_run_is_busy_the_best_one_is_awaited(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url)
    state = runs.context.registry.get(run_id)
    assert state is not None
    thread, release = hold_lock(state.lock)
    timer = threading.Timer(RUN_LOCK_PATIENCE * 5, release.set)
    timer.start()
    try:
        assert take_task(runs, alice, worker())["run"]["_id"] == run_id
    finally:
        release.set()
        timer.cancel()
        timer.join()
        thread.join()
