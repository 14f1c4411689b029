"""update_task in batches: the updates waiting at one moment share one transaction.

Every update_task used to take a threadpool thread, open a transaction, write
its task and its run, commit and wait for the WAL sync: at a few hundred
updates a second most of the core went to that per-call machinery (the fleet benchmark's
profiles: SQLAlchemy's connection, begin, execute and commit, the thread hops),
not to the update itself. Here one thread takes every update waiting, folds
each into its run's change under the run's lock (updates of one run chain,
each reading what the previous left), commits all the runs' changes in one
transaction, and answers only once its sync is done: a worker told "saved" is
never contradicted by a crash, as before. When more updates wait, that wait
is left to the thread's settler (call_batches.py) while this thread serves
them.

Each update is answered as if it had run alone: a refused one (400) changes
nothing and does not affect the others; if the commit fails, every update of
the batch gets the error and nothing of it is published. A run whose lock is
busy, or that leaves memory (finished) or is purged within the batch, has its
remaining updates served one by one after the batch, the unbatched way.

Threads: `update_task_async` on the event loop (it only queues); everything
else on the batch thread.
"""

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from arbiter.domain.runs.call_batches import (
    BatchThread,
    Finish,
    QueuedCall,
    reply_when_durable,
)
from arbiter.domain.runs.ingest import ResultIngest, ResultUpdate, check_consistent
from arbiter.domain.runs.registry import Change, RunContext, RunState
from arbiter.telemetry import UPDATE_BATCH_SIZE

BATCH_MAX = 256  # updates committed together at most
IDLE_SECONDS = 2.0  # the batch thread ends after this long without an update
# Near saturation an update may wait this long for others to share its
# transaction and fsync (call_batches.py: less while the CPU is not scarce, none
# below half a core): some ms on a call a worker makes every minute or so, for
# about a tenth less CPU per request in the fleet benchmark's heavy mix at x4.
GATHER_SECONDS = 0.010


@dataclass(eq=False)
class _UpdateCall(QueuedCall):
    update: ResultUpdate


@dataclass
class _RunBatch:
    """One run's updates in a batch, its lock held while they are folded in."""

    state: RunState
    change: Change
    served: list[tuple[_UpdateCall, dict[str, Any]]] = field(default_factory=list)


class UpdateBatches:
    def __init__(self, ingest: ResultIngest, context: RunContext) -> None:
        self._ingest = ingest
        self._context = context
        self._thread: BatchThread[_UpdateCall] = BatchThread(
            "arbiter-results",
            self._serve,
            _take_batch,
            IDLE_SECONDS,
            gather_seconds=GATHER_SECONDS,
            lifetime=context.storage.connection_held,
        )

    def close(self) -> None:
        """Answer what is queued, then end the results thread (call_batches.py)."""
        self._thread.close()

    async def update_task_async(self, update: ResultUpdate) -> dict[str, Any]:
        """update_task, answered once its batch is durable (on the event loop)."""
        check_consistent(update.stats)  # a 400 before anything is read or queued
        return await self._thread.call_async(_UpdateCall(update=update))

    def _serve(self, calls: list[_UpdateCall]) -> Finish | None:
        UPDATE_BATCH_SIZE.observe(len(calls))
        later: list[_UpdateCall] = []
        held: dict[str, _RunBatch] = {}
        with self._context.storage.durable_later() as durability:
            try:
                for call in calls:
                    batch = self._hold(held, call.update.run_id)
                    if batch is None or batch.change.run.finished or batch.change.purged:
                        later.append(call)
                    else:
                        self._fold(batch, call)
                replies = self._commit(list(held.values()))
            finally:
                for batch in held.values():
                    batch.state.lock.release()
        for call in later:  # rare: served alone, each durable before it returns
            try:
                call.reply = self._ingest.update_alone(call.update)
            except Exception as error:
                call.reply = error
        return reply_when_durable(durability, replies)

    def _hold(self, held: dict[str, _RunBatch], run_id: str) -> _RunBatch | None:
        """The run's batch, its lock taken on first use without waiting (a run busy
        elsewhere is served after the batch: no lock is awaited while others are
        held); None if the run is not live or its lock is busy."""
        if run_id in held:
            return held[run_id]
        registry = self._context.registry
        state = registry.get(run_id)
        if state is None or not state.lock.acquire(blocking=False):
            return None
        if registry.get(run_id) is not state:  # finished while we took the lock
            state.lock.release()
            return None
        held[run_id] = batch = _RunBatch(state, Change(state.run))
        return batch

    def _fold(self, batch: _RunBatch, call: _UpdateCall) -> None:
        """Fold one update into its run's change; a refused one leaves it as it was."""
        change = batch.change
        before = (change.run, dict(change.saved), len(change.log), len(change.purged))
        try:
            batch.served.append((call, self._ingest.apply_update(batch.state, change, call.update)))
        except Exception as error:
            change.run, change.saved = before[0], before[1]
            del change.log[before[2] :], change.purged[before[3] :]
            call.reply = error

    def _commit(self, batches: list[_RunBatch]) -> list[tuple[_UpdateCall, Any]]:
        """Commit every run's change at once: each folded update and its reply, or
        the commit's error for every one of them."""
        pending = [(b.state, b.change) for b in batches if b.change.saved or b.change.log]
        served = [pair for batch in batches for pair in batch.served]
        try:
            if pending:
                self._context.commit_many(pending)
        except Exception as error:
            return [(call, error) for call, _ in served]
        return served


def _take_batch(queue: deque[_UpdateCall]) -> list[_UpdateCall]:
    """The waiting updates, oldest first (a worker's updates are sequential: one
    worker never has two in a batch, but a retry of a lost reply may, and then
    reads the first as already applied)."""
    return [queue.popleft() for _ in range(min(len(queue), BATCH_MAX))]
