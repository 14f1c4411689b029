"""update_task in batches: each update answered as if it had run alone, all of a
batch committed in one transaction, durable before any answer."""

import asyncio
import threading

import pytest
from sqlalchemy import Connection, Engine, event

from arbiter.domain.accounts import User
from arbiter.domain.actions import Actions
from arbiter.domain.errors import BadRequest
from arbiter.domain.runs import update_batches
from arbiter.domain.runs.ingest import ResultUpdate, not_active
from arbiter.domain.runs.service import Runs
from arbiter.domain.runs.update_batches import UpdateBatches, _UpdateCall
from arbiter.protocol.messages import Stats, WorkerInfo
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from arbiter.storage.engine import wal_sync
from tests import fresh_loop
from tests.domain.runs.support import (
    approved_run,
    hold_lock,
    pairs,
    take_task,
    worker,
)
from tests.jobs.support import wait_until

Held = tuple[str, WorkerInfo, int]  # a task: its run id, its worker, its id


def stored_totals(storage: Storage, run_id: str) -> tuple[int, int, int, list[int]]:
    with storage.read() as tx:
        run = tx.runs.get(run_id)
    assert run is not None
    return run.wins, run.losses, run.draws, list(run.pentanomial)


def serve(runs: Runs, updates: list[ResultUpdate]) -> list[object]:
    """One batch, served as the results thread serves what it finds waiting, and
    finished as its settler finishes it."""
    calls = [_UpdateCall(update=update) for update in updates]
    finish = runs.updates._serve(calls)
    if finish is not None:
        finish()
    return [call.reply for call in calls]


@pytest.fixture
def two_runs(
    runs: Runs, alice: User, root: User, repo_url: str
) -> list[tuple[str, WorkerInfo, int]]:
    """Two runs and tasks of both (run id, worker, task id), the first and the
    last of different runs."""
    run_ids = {approved_run(runs, alice, root, repo_url, num_games=20_000) for _ in range(2)}
    held = []
    for index in range(12):
        info = worker(key=f"w{index:02d}")
        reply = take_task(runs, alice, info, addr=f"10.0.0.{index}")
        held.append((str(reply["run"]["_id"]), info, int(reply["task_id"])))
        if {run_id for run_id, _, _ in held} == run_ids and len(held) >= 3:
            break
    assert {run_id for run_id, _, _ in held} == run_ids, "the scheduler fed one run only"
    first = held[0][0]
    held.sort(key=lambda entry: entry[0] != first)  # the first run's tasks first
    return held


def test_a_batch_of_several_runs_counts_each_update_once(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    updates = [
        ResultUpdate(info, run_id, task_id, pairs(ld=1, dd=2, wd=1))
        for run_id, info, task_id in two_runs
    ]
    assert serve(runs, updates) == [{"task_alive": True}] * len(updates)
    for run_id in {run_id for run_id, _, _ in two_runs}:
        tasks = sum(1 for r, _, _ in two_runs if r == run_id)
        assert stored_totals(storage, run_id) == (
            tasks,
            tasks,
            6 * tasks,
            [0, tasks, 2 * tasks, tasks, 0],
        )


def test_updates_of_one_task_chain_and_a_repeat_changes_nothing(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    run_id, info, task_id = two_runs[0]
    first, second = pairs(dd=1), pairs(dd=2, wd=1)
    replies = serve(
        runs,
        [
            ResultUpdate(info, run_id, task_id, first),
            ResultUpdate(info, run_id, task_id, second),
            ResultUpdate(info, run_id, task_id, second),  # a retry after a lost reply
        ],
    )
    assert replies == [{"task_alive": True}] * 3
    assert stored_totals(storage, run_id) == (1, 0, 5, [0, 0, 2, 1, 0])


def test_a_refused_update_changes_nothing_and_its_neighbours_are_saved(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    run_id, info, task_id = two_runs[0]
    stranger = worker(key="stranger")
    good: Stats = pairs(ww=1)
    replies = serve(
        runs,
        [
            ResultUpdate(stranger, run_id, task_id, pairs(ww=3)),  # not its task: 400
            ResultUpdate(info, run_id, task_id, good),
        ],
    )
    assert isinstance(replies[0], BadRequest)
    assert replies[1] == {"task_alive": True}
    assert stored_totals(storage, run_id) == (2, 0, 0, [0, 0, 0, 0, 1])


def test_going_backwards_in_a_batch_kills_only_that_task(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    run_id, info, task_id = two_runs[0]
    replies = serve(
        runs,
        [
            ResultUpdate(info, run_id, task_id, pairs(dd=3)),
            ResultUpdate(info, run_id, task_id, pairs(dd=2)),
        ],
    )
    assert replies[0] == {"task_alive": True}
    assert isinstance(replies[1], dict)
    assert replies[1]["task_alive"] is False
    assert "went down" in str(replies[1]["error"])
    assert stored_totals(storage, run_id) == (0, 0, 6, [0, 0, 3, 0, 0])
    assert not runs.context.registry.get(run_id).tasks[task_id].active  # type: ignore[union-attr]


def test_a_run_busy_elsewhere_is_served_after_the_batch(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    """No lock is awaited while the batch holds others: the other runs' updates
    are committed while the busy run's lock is still held elsewhere, and the
    busy run's update then waits for its lock alone."""
    (run_a, info_a, task_a), (run_b, info_b, task_b) = two_runs[0], two_runs[-1]
    assert run_a != run_b
    state_b = runs.context.registry.get(run_b)
    assert state_b is not None
    holder, release = hold_lock(state_b.lock)
    replies: list[object] = []
    updates = [
        ResultUpdate(info_b, run_b, task_b, pairs(ww=1)),  # first: its lock is busy
        ResultUpdate(info_a, run_a, task_a, pairs(ll=1)),
    ]
    server = threading.Thread(target=lambda: replies.extend(serve(runs, updates)))
    server.start()
    try:
        wait_until(lambda: stored_totals(storage, run_a)[1] == 2, timeout=5)
        assert not replies, "answered before the busy run's update was served"
    finally:
        release.set()
        holder.join()
        server.join(10)
    assert replies == [{"task_alive": True}] * 2
    assert stored_totals(storage, run_b)[0] == 2


def test_a_batch_of_several_runs_is_one_transaction(
    runs: Runs, engine: Engine, two_runs: list[Held]
) -> None:
    updates = [
        ResultUpdate(info, run_id, task_id, pairs(dd=1)) for run_id, info, task_id in two_runs
    ]
    commits: list[Connection] = []

    def count(connection: Connection) -> None:
        commits.append(connection)

    event.listen(engine, "commit", count)
    try:
        replies = serve(runs, updates)
    finally:
        event.remove(engine, "commit", count)
    assert replies == [{"task_alive": True}] * len(updates)
    assert len(commits) == 1


def test_a_refused_update_keeps_what_the_updates_before_it_logged(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    """A refused update takes back only what it changed: the failed_task that an
    earlier update of the batch logged is still committed."""
    run_id, info, task_id = two_runs[0]
    replies = serve(
        runs,
        [
            ResultUpdate(info, run_id, task_id, pairs(dd=3)),
            ResultUpdate(info, run_id, task_id, pairs(dd=2)),  # went down: killed, logged
            ResultUpdate(worker(key="stranger"), run_id, task_id, pairs(ww=1)),  # 400
        ],
    )
    assert isinstance(replies[2], BadRequest)
    failed = Actions(storage).list(ActionFilter(run_id=run_id, action="failed_task"))
    assert [entry["task_id"] for entry in failed] == [task_id]
    assert stored_totals(storage, run_id) == (0, 0, 6, [0, 0, 3, 0, 0])


def test_updates_of_runs_not_live_are_answered_alone_beside_the_batch(
    runs: Runs, alice: User, two_runs: list[Held]
) -> None:
    """A finished run, or none: served the unbatched way, after the batch; an
    error there is that update's answer only."""
    run_id, info, task_id = two_runs[0]
    live_run, live_info, live_task = two_runs[-1]
    runs.lifecycle.stop(alice, run_id)
    replies = serve(
        runs,
        [
            ResultUpdate(info, run_id, task_id, pairs(dd=1)),
            ResultUpdate(info, "0" * 24, 0, pairs(dd=1)),
            ResultUpdate(live_info, live_run, live_task, pairs(dd=1)),
        ],
    )
    assert replies[0] == not_active(run_id, task_id)
    assert isinstance(replies[1], BadRequest)
    assert "Invalid run_id" in str(replies[1])
    assert replies[2] == {"task_alive": True}


def test_the_results_thread_is_named_and_ends_when_idle(
    runs: Runs, two_runs: list[Held], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named for thread dumps and profiles; it ends after IDLE_SECONDS without an
    update."""
    monkeypatch.setattr(update_batches, "IDLE_SECONDS", 0.2)
    batches = UpdateBatches(runs.ingest, runs.context)
    run_id, info, task_id = two_runs[0]
    names: list[str] = []

    async def send() -> dict[str, object]:
        sent = asyncio.ensure_future(
            batches.update_task_async(ResultUpdate(info, run_id, task_id, pairs(dd=1)))
        )
        await asyncio.sleep(0)  # queued: the thread has started
        names.extend(thread.name for thread in threading.enumerate())
        return await sent

    assert fresh_loop.run(send()) == {"task_alive": True}
    assert "arbiter-results" in names
    wait_until(lambda: not batches._thread.running, timeout=5)


def test_an_update_from_the_event_loop_is_answered_through_the_thread(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    run_id, info, task_id = two_runs[0]

    async def send() -> list[dict[str, object]]:
        updates = [ResultUpdate(info, run_id, task_id, pairs(dd=n)) for n in (1, 2, 3)]
        return list(await asyncio.gather(*map(runs.updates.update_task_async, updates)))

    assert fresh_loop.run(send()) == [{"task_alive": True}] * 3
    assert stored_totals(storage, run_id) == (0, 0, 6, [0, 0, 3, 0, 0])


def test_inconsistent_counts_are_refused_before_they_are_queued(
    runs: Runs, two_runs: list[Held]
) -> None:
    run_id, info, task_id = two_runs[0]
    broken = Stats(5, 0, 0, 0, 0, [0, 0, 0, 0, 1])  # 5 wins from one pair

    async def send() -> None:
        await runs.updates.update_task_async(ResultUpdate(info, run_id, task_id, broken))

    with pytest.raises(BadRequest, match="incompatible stats"):
        fresh_loop.run(send())
    assert not runs.updates._thread.running


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the sync is ours
def test_a_batch_is_answered_once_synced_and_the_next_is_served_before(
    runs: Runs, storage: Storage, two_runs: list[Held]
) -> None:
    """The results thread's serve commits a batch and returns what is left, the
    wait for its sync and the replies: the next batch is committed before that
    runs, and the replies appear only once it has."""
    (run_a, info_a, task_a), (run_b, info_b, task_b) = two_runs[0], two_runs[-1]
    before = stored_totals(storage, run_b)[2]
    sync = wal_sync(storage.engine)
    assert sync is not None
    first = [_UpdateCall(update=ResultUpdate(info_a, run_a, task_a, pairs(dd=1)))]
    second = [_UpdateCall(update=ResultUpdate(info_b, run_b, task_b, pairs(dd=1)))]
    syncs = sync.syncs
    finish_first = runs.updates._serve(first)
    finish_second = runs.updates._serve(second)
    assert finish_first is not None
    assert finish_second is not None
    assert stored_totals(storage, run_b)[2] == before + 2  # committed, not yet answered
    assert [call.reply for call in first + second] == [None, None]
    assert sync.syncs == syncs
    finish_first()
    finish_second()  # covered by the first one's sync
    assert [call.reply for call in first + second] == [{"task_alive": True}] * 2
    assert sync.syncs == syncs + 1
