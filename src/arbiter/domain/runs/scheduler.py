"""request_task: which run a worker should play next, and the task it gets (reference 4).

The seeds' admission gate comes first: a non-blocking semaphore, passed on the
event loop, so at most TASK_SEMAPHORE_SIZE calls are ever queued for or inside
a decision, and a caller told "too busy" costs nothing more; one account holds
at most its share of it (`admission.AdmissionGate`). The seeds' one
lock around the decision becomes one scheduling thread: it takes every call
waiting at once, decides them one after another (each decision sees those
before it), commits all their tasks in one transaction and answers them once
that commit is durable; when more calls wait, its settler waits for the disk
and answers while this thread decides them (call_batches.py). A batch of
calls costs one transaction and at most one fsync, and a call waiting its
turn holds no threadpool thread. The thread starts when a call comes and
ends after IDLE_SECONDS without one.

Threads: `admit` and `assign_task_async` run on the event loop (they only
touch the queue, under a lock held for a few list operations); `request_task`
and `assign_task` in any other thread (they block until answered);
everything else on the scheduling thread.
"""

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from arbiter.domain.accounts import User
from arbiter.domain.files.books import BookIndex
from arbiter.domain.runs.admission import AdmissionGate
from arbiter.domain.runs.call_batches import (
    BatchThread,
    Finish,
    QueuedCall,
    reply_when_durable,
)
from arbiter.domain.runs.documents import results_view, wire_args
from arbiter.domain.runs.ingest import retire_task
from arbiter.domain.runs.ranking import (
    OUTRANKED,
    RunNeeds,
    best_ranked,
    ranked,
    task_games,
    unsuitable,
)
from arbiter.domain.runs.registry import Change, Registry, RunContext, RunState
from arbiter.domain.runs.task_info import task_worker_info
from arbiter.domain.workers import BlockedMachines
from arbiter.protocol.messages import WorkerInfo
from arbiter.protocol.workers import worker_names
from arbiter.storage.durability import Durability
from arbiter.storage.records import RunRecord, TaskRecord, no_results
from arbiter.telemetry import SCHEDULER_BATCH_SIZE

TOO_BUSY = "Request_task: the server is currently too busy, please try again later."
DUPLICATE_WINDOW = 120.0  # s: a same-named worker heard from this recently is still alive
STALE_TASK = "Stale active task"

# How long the scheduler waits for a run busy committing results before it tries
# the next run in rank order. Waiting longer holds up every call queued behind
# this one while result updates of that run commit. If every suitable run is
# busy, it waits for the best one.
RUN_LOCK_PATIENCE = 0.02
NEEDS_KEPT = 1000  # runs whose static needs are remembered before finished ones are dropped
BATCH_MAX = 64  # calls decided and committed together at most
IDLE_SECONDS = 2.0  # the scheduling thread ends after this long without a call


def too_busy() -> dict[str, Any]:
    """The reply to a request_task refused by the admission gate."""
    return {"task_waiting": False, "info": TOO_BUSY}


class _RunBusy(Exception):  # noqa: N818 - a signal, not an error
    """A run's lock was not free within the scheduler's patience."""


@dataclass(frozen=True, slots=True)
class Assignment:
    state: RunState
    task: TaskRecord


@dataclass(eq=False)
class _Call(QueuedCall):
    """One request_task waiting for the scheduling thread."""

    worker: WorkerInfo
    user: User
    remote_addr: str
    short_name: str = field(init=False)

    def __post_init__(self) -> None:
        self.short_name = worker_names(self.worker)[1]


class _Batch:
    """Decisions of one batch not yet committed: per run, its change. A run's lock is
    held from the first decision that touches it until the batch ends, and every
    later decision reads the run as the change leaves it."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self.changes: dict[str, tuple[RunState, Change]] = {}
        self.per_address: Counter[tuple[str, str]] = Counter()  # tasks handed out here

    @property
    def runs(self) -> dict[str, RunRecord]:
        """The runs this batch holds, as its changes leave them (what ranking reads)."""
        return {run_id: change.run for run_id, (_, change) in self.changes.items()}

    def run(self, state: RunState) -> RunRecord:
        held = self.changes.get(state.run.id)
        return state.run if held is None else held[1].run

    def hold(self, state: RunState, patience: float | None) -> Change | None:
        """The batch's change of this run, its lock taken on first use; None if the
        run has finished. Raises `_RunBusy` if the lock is not free in time."""
        held = self.changes.get(state.run.id)
        if held is not None:
            return held[1]
        if not state.lock.acquire(timeout=-1 if patience is None else patience):
            raise _RunBusy
        # The run may have finished (and left the registry) while we waited.
        if state.run.finished or self._registry.get(state.run.id) is not state:
            state.lock.release()
            return None
        change = Change(state.run)
        self.changes[state.run.id] = (state, change)
        return change

    def pending(self) -> list[tuple[RunState, Change]]:
        return [(s, c) for s, c in self.changes.values() if c.added or c.saved or c.log]

    def release(self) -> None:
        for state, _ in self.changes.values():
            state.lock.release()
        self.changes.clear()


class TaskScheduler:
    def __init__(
        self,
        context: RunContext,
        gate: AdmissionGate,
        blocked: BlockedMachines,
        books: BookIndex,
    ) -> None:
        self._context = context
        self._gate = gate
        self._blocked = blocked
        self._books = books
        self._batches: BatchThread[_Call] = BatchThread(
            "arbiter-assign",
            self._serve,
            _take_batch,
            IDLE_SECONDS,
            not_queued=lambda call: self._gate.leave(call.user.username),
            lifetime=context.storage.connection_held,
        )
        self._needs: dict[str, RunNeeds] = {}  # by run id; scheduling thread only
        self._needs_catalogue = self._books.catalogue_version()  # what _needs was built with

    def close(self) -> None:
        """Answer what is queued, then end the scheduling thread (call_batches.py)."""
        self._batches.close()

    def request_task(self, worker: WorkerInfo, user: User, remote_addr: str) -> dict[str, Any]:
        """The reply body of /api/request_task (without `duration`). Blocks."""
        return self.assign_task(worker, user, remote_addr) if self.admit(user) else too_busy()

    def admit(self, user: User) -> bool:
        """The admission gate: whether this caller got in, without waiting (refused
        too when `user`'s account already holds its share of the places). A caller
        let in must then call `assign_task` or `assign_task_async` with the same
        user, which give the place back once the call has been decided (before
        its fsync).

        Never blocks, so the web layer passes it on the event loop and a caller
        that is refused is answered at once."""
        return self._gate.enter(user.username)

    async def admit_or_wait(self, user: User, patience: float, room_patience: float = 0.0) -> bool:
        """The admission gate on the event loop: a call past its account's share
        waits up to `patience` s for one of the account's places, a call at a
        full gate up to `room_patience` s for the next place given back, and is
        refused after that if none came (`AdmissionGate.enter_or_wait`). Let
        in, it goes on as after `admit`."""
        return await self._gate.enter_or_wait(user.username, patience, room_patience)

    def gate_occupied(self) -> int:
        """Places of the admission gate held now (queued for or inside a decision)."""
        return self._gate.occupied()

    def at_machine_limit(self, user: User, remote_addr: str) -> bool:
        """Whether `user` already runs its machine limit of tasks from this address,
        so a call from there now would be refused (a hint read from memory: the
        scheduling thread decides). Never blocks, so the web layer asks it on the
        event loop."""
        return self._context.registry.tasks_from(user.username, remote_addr) >= user.machine_limit

    def assign_task(self, worker: WorkerInfo, user: User, remote_addr: str) -> dict[str, Any]:
        """request_task for a caller let in by `admit`: blocks until the scheduling
        thread has answered (not for the event loop)."""
        return self._batches.call_blocking(_Call(worker, user, remote_addr))

    async def assign_task_async(
        self, worker: WorkerInfo, user: User, remote_addr: str
    ) -> dict[str, Any]:
        """request_task for a caller let in by `admit`, on the event loop."""
        return await self._batches.call_async(_Call(worker, user, remote_addr))

    # --- the scheduling thread ---

    def _serve(self, calls: list[_Call]) -> Finish | None:
        """Decide and commit; the replies once that is durable (on the settler if the
        disk must still sync it). Any error is every call's answer: nothing of
        the batch was published unless all of it committed."""
        try:
            decided, durability = self._decide_and_commit(calls)
            replies = [
                self._reply(outcome) if isinstance(outcome, Assignment) else outcome
                for outcome in decided
            ]
        except Exception as error:
            for call in calls:
                call.reply = error
            return None
        return reply_when_durable(durability, list(zip(calls, replies, strict=True)))

    def _decide_and_commit(
        self, calls: list[_Call]
    ) -> tuple[list[Assignment | dict[str, Any]], Durability]:
        batch = _Batch(self._context.registry)
        SCHEDULER_BATCH_SIZE.observe(len(calls))
        # Nobody waits for the fsync here: the run locks are free and the calls'
        # places at the gate given back at once, and the disk is waited for
        # after (by the settler while this thread decides the next calls).
        with self._context.storage.durable_later() as durability:
            try:
                decided = [self._decide(call, batch) for call in calls]
                pending = batch.pending()
                if pending:
                    self._context.commit_many(pending)
                for state, change in pending:
                    if change.added:
                        state.refusals.clear()
            finally:
                batch.release()
                for call in calls:
                    self._gate.leave(call.user.username)
        return decided, durability

    def _decide(self, call: _Call, batch: _Batch) -> Assignment | dict[str, Any]:
        refusal = self._refusal(call, batch)
        if refusal is not None:
            return {"task_waiting": False, "error": refusal}
        assignment = self._assign(call, batch)
        return assignment if assignment is not None else {"task_waiting": False}

    # --- pre-checks (reference 4.2) ---

    def _refusal(self, call: _Call, batch: _Batch) -> str | None:
        short, user = call.short_name, call.user
        block_message = self._blocked.message(short)
        if block_message is not None:
            reason = f": {block_message}" if block_message else ""
            return (
                f"This worker ({short}) has been blocked{reason}. "
                f"An approver can unblock it at /workers/{short}."
            )
        if self._duplicate(call.worker, short):
            return f"There is already a worker running with name {short}."
        key = (user.username, call.remote_addr)
        registry = self._context.registry
        if registry.tasks_from(*key) + batch.per_address[key] >= user.machine_limit:
            return f"Machine limit reached for user {user.username}."
        return None

    def _duplicate(self, worker: WorkerInfo, short: str) -> bool:
        registry = self._context.registry
        held = registry.active_task_of(short)
        if held is None:
            return False
        state = registry.get(held[0])
        lease = registry.lease(*held)
        if state is None or lease is None:
            return False
        task = state.tasks[held[1]]
        recent = self._context.clock() - lease <= DUPLICATE_WINDOW
        return task.unique_key != worker.unique_key and recent

    # --- choosing a run (reference 4.3, 4.4) ---

    def _assign(self, call: _Call, batch: _Batch) -> Assignment | None:
        registry = self._context.registry
        previous = registry.last_run_of(call.short_name)
        previous_task = registry.active_task_of(call.short_name)
        states = registry.states()
        chosen = self._assign_best(states, call, batch, previous)
        if chosen is None:
            chosen = self._assign_in_order(states, call, batch, previous)
        if chosen is not None and previous_task is not None:
            self._retire_stale(*previous_task, batch)
        return chosen

    def _assign_best(
        self, states: list[RunState], call: _Call, batch: _Batch, previous: str | None
    ) -> Assignment | None:
        """The common case without sorting every run: the best-ranked run suits the
        worker and its lock is free (or already the batch's). None: otherwise."""
        state = best_ranked(states, call.worker, previous, batch.runs)
        if state is None or unsuitable(batch.run(state), self._needs_of(state), call.worker):
            return None
        try:
            chosen = self._create_task(state, call, batch, patience=0.0)
        except _RunBusy:
            return None
        if chosen is not None:  # the chosen run has a worker now: not counted
            self._count_outranked(states, call.worker, batch)
        return chosen

    def _assign_in_order(
        self, states: list[RunState], call: _Call, batch: _Batch, previous: str | None
    ) -> Assignment | None:
        """Runs in rank order: the first that suits the worker and whose lock is free
        within RUN_LOCK_PATIENCE; if every suitable one is busy, wait for the best."""
        worker = call.worker
        order = ranked(states, worker, previous, batch.runs)
        busy: list[RunState] = []
        for position, state in enumerate(order):
            run = batch.run(state)
            reason = unsuitable(run, self._needs_of(state), worker)
            if reason is not None:
                self._count_refusal(state, run, worker, reason)
                continue
            try:
                chosen = self._create_task(state, call, batch, RUN_LOCK_PATIENCE)
            except _RunBusy:
                busy.append(state)
                continue
            if chosen is not None:
                self._count_outranked(order[position + 1 :], worker, batch)  # suitable or not
                return chosen
        return self._create_task(busy[0], call, batch, patience=None) if busy else None

    def _count_outranked(self, states: list[RunState], worker: WorkerInfo, batch: _Batch) -> None:
        pending = batch.runs
        for state in states:
            run = state.run
            if pending:  # inline `batch.run`: this loops over every run
                run = pending.get(run.id, run)
            if not run.workers:
                self._count_refusal(state, run, worker)

    def _retire_stale(self, run_id: str, task_id: int, batch: _Batch) -> None:
        """The machine was restarted and lost its task: free that task's games."""
        state = self._context.registry.get(run_id)
        if state is None:
            return
        change = batch.hold(state, patience=None)
        now = self._context.clock()
        if change is not None:
            retire_task(state, change, task_id, STALE_TASK, now=now)

    def _count_refusal(
        self, state: RunState, run: RunRecord, worker: WorkerInfo, reason: str | None = None
    ) -> None:
        """Why this run was not given to the worker, kept only while the run has no
        workers: only then are the reasons shown (`why_no_workers`), and skipping
        runs that have workers keeps request_task from examining every run."""
        if not run.workers:
            reason = reason or unsuitable(run, self._needs_of(state), worker) or OUTRANKED
            state.refusals[reason] += 1

    def _needs_of(self, state: RunState) -> RunNeeds:
        catalogue = self._books.catalogue_version()
        if catalogue != self._needs_catalogue:  # which books are in it may have changed
            self._needs, self._needs_catalogue = {}, catalogue
        needs = self._needs.get(state.run.id)
        if needs is None:
            if len(self._needs) > NEEDS_KEPT:  # forget finished runs now and then
                live = {s.run.id for s in self._context.registry.states()}
                self._needs = {k: v for k, v in self._needs.items() if k in live}
            spec = state.run.args
            in_catalogue = self._books.in_catalogue(spec.book)
            needs = self._needs[state.run.id] = RunNeeds.of(spec, in_catalogue)
        return needs

    def _create_task(
        self, state: RunState, call: _Call, batch: _Batch, patience: float | None
    ) -> Assignment | None:
        """A new task of `state` in the batch (None if the run needs no more games).
        Raises `_RunBusy` when the run's lock is not free within `patience` seconds
        (None: wait)."""
        change = batch.hold(state, patience)
        if change is None:
            return None
        size = task_games(change.run, self._needs_of(state), call.worker)
        if size <= 0:
            return None
        task_id = len(state.tasks) + len(change.added)
        task = _new_task(change.run, task_id, call, size, self._context.clock())
        change.add_task(task)
        batch.per_address[(call.user.username, call.remote_addr)] += 1
        return Assignment(state, task)

    def _reply(self, assignment: Assignment) -> dict[str, Any]:
        run, task = assignment.state.run, assignment.task
        args = wire_args(run.args)
        args["book_sri"] = self._books.sri(str(args.get("book", ""))) or ""
        my_task = {"num_games": task.num_games, "start": task.start, "stats": results_view(task)}
        return {"run": {"_id": run.id, "args": args, "my_task": my_task}, "task_id": task.task_id}


def _new_task(run: RunRecord, task_id: int, call: _Call, size: int, now: float) -> TaskRecord:
    worker = call.worker
    return TaskRecord(
        run_id=run.id,
        task_id=task_id,
        num_games=size,
        start=run.total_games,
        active=True,
        bad=False,
        last_updated=now,
        username=worker.username,
        worker_name=call.short_name,
        unique_key=worker.unique_key,
        remote_addr=call.remote_addr,
        worker_info=task_worker_info(worker, call.remote_addr),
        **no_results(),
        residual=None,
        spsa_params=None,
    )


def _take_batch(queue: deque[_Call]) -> list[_Call]:
    """The waiting calls, oldest first, except that a worker already in the batch
    waits for the next one (its second call depends on its first)."""
    taken: list[_Call] = []
    names: set[str] = set()
    later: list[_Call] = []
    while queue and len(taken) < BATCH_MAX:
        call = queue.popleft()
        (later if call.short_name in names else taken).append(call)
        names.add(call.short_name)
    queue.extendleft(reversed(later))
    return taken
