"""request_task: admission gate, pre-checks, run choice, task sizing."""

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from arbiter.domain.accounts import User
from arbiter.domain.runs.admission import AdmissionGate
from arbiter.domain.runs.ranking import NOT_APPROVED, TOO_MANY_THREADS
from arbiter.domain.runs.scheduler import RUN_LOCK_PATIENCE, TOO_BUSY, TaskScheduler
from arbiter.domain.runs.service import Runs
from arbiter.protocol.messages import WorkerInfo
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from tests import fresh_loop
from tests.domain.runs.support import (
    approved_run,
    hold_lock,
    make_user,
    submit,
    take_task,
    worker,
)
from tests.jobs.support import wait_until


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


def test_full_gate_answers_too_busy_at_once(
    storage: Storage, alice: User, new_runs: Callable[..., Runs]
) -> None:
    gate = threading.Semaphore(0)
    runs = new_runs(storage, task_gate=gate)
    scheduler: TaskScheduler = runs.scheduler
    assert scheduler.request_task(worker(), alice, "1.1.1.1") == {
        "task_waiting": False,
        "info": TOO_BUSY,
    }


def test_an_account_holding_its_share_is_too_busy_while_others_get_in(
    storage: Storage, alice: User, root: User, repo_url: str, new_runs: Callable[..., Runs]
) -> None:
    runs = new_runs(storage, task_gate=AdmissionGate(threading.Semaphore(5), per_account=2))
    approved_run(runs, alice, root, repo_url, num_games=100_000)
    flood = make_user(storage, "flood")
    shouting = replace(flood, username="FLOOD")  # the same account, spelled otherwise
    assert runs.scheduler.admit(flood)
    assert runs.scheduler.admit(shouting)
    assert runs.scheduler.request_task(worker("flood", key="f1"), flood, "9.9.9.9") == {
        "task_waiting": False,
        "info": TOO_BUSY,
    }
    assert "task_id" in runs.scheduler.request_task(worker(), alice, "1.1.1.1")


def test_a_flooding_account_never_shuts_out_another(
    storage: Storage, alice: User, root: User, repo_url: str, new_runs: Callable[..., Runs]
) -> None:
    """20 threads of one account call request_task without pause while alice asks
    for work: every one of alice's calls is decided, none is "too busy"."""
    runs = new_runs(storage, task_gate=AdmissionGate(threading.Semaphore(5), per_account=2))
    approved_run(runs, alice, root, repo_url, num_games=3_000_000)
    flood = make_user(storage, "flood")
    stop = threading.Event()
    flood_replies: list[dict[str, Any]] = []

    def flooding(thread: int) -> None:
        for serial in itertools.count():
            if stop.is_set():
                return
            machine = worker("flood", key=f"{thread:02x}{serial:06x}")
            address = f"10.{thread}.{serial >> 8 & 255}.{serial & 255}"
            reply = runs.scheduler.request_task(machine, flood, address)
            flood_replies.append(reply)
            if reply.get("info") == TOO_BUSY:
                time.sleep(0.001)  # only so that 20 spinning threads leave others the GIL

    with ThreadPoolExecutor(max_workers=20) as pool:
        for thread in range(20):
            pool.submit(flooding, thread)
        try:
            deadline = time.monotonic() + 30
            while not any(r.get("info") == TOO_BUSY for r in flood_replies):  # flooding now
                assert time.monotonic() < deadline
                time.sleep(0.01)
            mine = [
                runs.scheduler.request_task(worker(key=f"a{i:03d}"), alice, f"1.1.1.{i}")
                for i in range(10)
            ]
        finally:
            stop.set()
    assert all("task_id" in reply for reply in mine), mine


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


def test_the_machine_limit_counts_every_spelling_of_the_name(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    approved_run(runs, alice, root, repo_url, num_games=100000)
    for i in range(alice.machine_limit):
        spelling = ("alice", "ALICE", "Alice")[i % 3]
        take_task(runs, alice, worker(spelling, key=f"m{i:03d}"), addr="9.9.9.9")
    reply = runs.scheduler.request_task(worker("ALICE", key="last"), alice, "9.9.9.9")
    assert reply["error"] == "Machine limit reached for user alice."


def test_arch_filter_and_compiler_pin(runs: Runs, alice: User, root: User, repo_url: str) -> None:
    approved_run(runs, alice, root, repo_url, arch_filter="avx2", compiler="clang++")
    reply = runs.scheduler.request_task(worker(), alice, "1.1.1.1")
    assert "task_id" not in reply
    fitting = worker(worker_arch="x86-64-avx2", compiler="clang++")
    assert "task_id" in runs.scheduler.request_task(fitting, alice, "1.1.1.1")


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


# --- batches: calls that wait together are decided together ---


def decided_together(
    runs: Runs, user: User, busy_run: str, calls: list[tuple[WorkerInfo, str]]
) -> list[dict[str, Any]]:
    """Make `calls` while `busy_run`'s lock is held elsewhere: the first call waits
    for the lock, the others queue behind it and are then decided as one batch."""
    state = runs.context.registry.get(busy_run)
    assert state is not None
    replies: list[dict[str, Any]] = [{} for _ in calls]

    def call(index: int, info: WorkerInfo, address: str) -> None:
        replies[index] = runs.scheduler.request_task(info, user, address)

    holder, release = hold_lock(state.lock)
    callers = [threading.Thread(target=call, args=(i, *c)) for i, c in enumerate(calls)]
    # The batch thread is private; peeking at it is the one way to know who has queued.
    batches = runs.scheduler._batches
    try:
        callers[0].start()  # taken by the scheduling thread, which waits for the run
        wait_until(lambda: batches.running and not batches.queued)
        for caller in callers[1:]:
            caller.start()
        wait_until(lambda: batches.queued == len(calls) - 1)
    finally:
        release.set()
        holder.join()
        for caller in callers:
            caller.join(10)
    return replies


def test_a_batch_hands_out_distinct_tasks_with_consecutive_openings(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=100_000)
    calls = [(worker(key=f"w{i:03d}"), f"10.0.0.{i}") for i in range(5)]
    replies = decided_together(runs, alice, run_id, calls)
    assert sorted(reply["task_id"] for reply in replies) == [0, 1, 2, 3, 4]
    my_tasks = [reply["run"]["my_task"] for reply in replies]
    openings = sorted((task["start"], task["num_games"]) for task in my_tasks)
    for (start, games), (next_start, _) in itertools.pairwise(openings):
        assert next_start == start + games
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert state.run.workers == 5
    with storage.read() as tx:  # one transaction stored what memory holds
        assert tx.runs.get(run_id) == state.run
        stored = tx.tasks.for_run(run_id)
    assert [(t.task_id, t.start, t.num_games, t.worker_name) for t in stored] == [
        (t.task_id, t.start, t.num_games, t.worker_name) for t in state.tasks
    ]


def test_the_machine_limit_counts_tasks_handed_out_in_the_same_batch(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=100_000)
    limited = replace(alice, machine_limit=3)
    calls = [(worker(key=f"w{i:03d}"), "9.9.9.9") for i in range(5)]
    replies = decided_together(runs, limited, run_id, calls)
    assert sum("task_id" in reply for reply in replies) == 3
    refused = [reply["error"] for reply in replies if "error" in reply]
    assert refused == ["Machine limit reached for user alice."] * 2


def test_a_workers_second_call_waits_for_the_batch_after_its_first(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    """The same machine asking twice (it restarted): as if one call followed the
    other, its second task replaces the first, which is retired as stale."""
    run_id = approved_run(runs, alice, root, repo_url, num_games=100_000)
    calls = [(worker(key="w000"), "10.0.0.1"), (worker(key="w001"), "10.0.0.2")]
    calls += [(worker(key="w001"), "10.0.0.2")]
    replies = decided_together(runs, alice, run_id, calls)
    assert all("task_id" in reply for reply in replies)
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert [task.active for task in state.tasks] == [True, False, True]
    assert state.run.workers == 2


def test_a_failed_commit_is_every_callers_error_and_changes_nothing(
    sqlite_database_url: str, repo_url: str, new_runs: Callable[..., Runs]
) -> None:
    engine = make_engine(sqlite_database_url, pool_size=5)
    sqlite_storage = Storage(engine)
    runs = new_runs(sqlite_storage, task_gate=threading.Semaphore(1))
    root = make_user(sqlite_storage, "root", approver=True)
    owner = make_user(sqlite_storage, "alice")
    run_id = approved_run(runs, owner, root, repo_url, num_games=100_000)
    with sqlite_storage.write() as tx:  # a real database error, from SQLite itself
        tx.connection.exec_driver_sql(
            "CREATE TRIGGER refuse_tasks BEFORE INSERT ON tasks"
            " BEGIN SELECT RAISE(ABORT, 'no new tasks today'); END"
        )
    with pytest.raises(IntegrityError, match="no new tasks today"):
        runs.scheduler.request_task(worker(), owner, "10.0.0.1")
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert (state.tasks, state.run.workers) == ([], 0)
    with sqlite_storage.write() as tx:
        tx.connection.exec_driver_sql("DROP TRIGGER refuse_tasks")
    # The gate's one place came back with the error.
    assert "task_id" in runs.scheduler.request_task(worker(), owner, "10.0.0.1")
    engine.dispose()


def test_the_gates_place_comes_back_once_the_call_is_decided(
    storage: Storage, alice: User, root: User, repo_url: str, new_runs: Callable[..., Runs]
) -> None:
    runs = new_runs(storage, task_gate=threading.Semaphore(1))
    approved_run(runs, alice, root, repo_url, num_games=100_000)
    for index in range(3):
        assert "task_id" in runs.scheduler.request_task(worker(key=f"w{index}"), alice, "1.1.1.1")


def test_calls_from_an_event_loop_are_answered_on_it(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    approved_run(runs, alice, root, repo_url, num_games=100_000)

    async def ask_together() -> list[dict[str, Any]]:
        assert all(runs.scheduler.admit(alice) for _ in range(4))
        calls = [
            runs.scheduler.assign_task_async(worker(key=f"w{i}"), alice, f"10.0.0.{i}")
            for i in range(4)
        ]
        return await asyncio.gather(*calls)

    # A loop of its own in a thread of its own: other suites leave one running here.
    with ThreadPoolExecutor(max_workers=1) as pool:
        replies = pool.submit(lambda: fresh_loop.run(ask_together())).result()
    assert sorted(reply["task_id"] for reply in replies) == [0, 1, 2, 3]


def test_the_scheduling_thread_ends_when_idle_and_comes_back_for_a_call(
    runs: Runs, alice: User, root: User, repo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs.scheduler._batches, "_idle_seconds", 0.01)
    approved_run(runs, alice, root, repo_url, num_games=100_000)
    assert "task_id" in take_task(runs, alice, worker(key="w1"))
    wait_until(lambda: not runs.scheduler._batches.running)
    assert "task_id" in take_task(runs, alice, worker(key="w2"))
