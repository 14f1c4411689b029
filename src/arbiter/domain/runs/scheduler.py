"""request_task: which run a worker should play next, and the task it gets (reference 4).

The seeds' admission gate comes first: a non-blocking semaphore (passed on the
event loop, so a refused caller never takes a threadpool token), then one lock
for the whole decision, so at most TASK_SEMAPHORE_SIZE threadpool tokens ever
wait here and beats and result updates never queue behind scheduling.
Everything but `admitted` runs in the threadpool.
"""

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgspec

from arbiter.domain.accounts import User
from arbiter.domain.run_args import parse_time_control
from arbiter.domain.runs.documents import hash_mib, results_view, wire_args
from arbiter.domain.runs.ingest import deactivate
from arbiter.domain.runs.registry import Change, RunContext, RunState
from arbiter.domain.workers import BlockedMachines
from arbiter.protocol.messages import WorkerInfo
from arbiter.protocol.workers import worker_names
from arbiter.stats.scheduling import memory_need, task_size
from arbiter.storage.records import TaskRecord, no_results

TOO_BUSY = "Request_task: the server is currently too busy, please try again later."
NO_GAMES_LEFT = "Request_task: the run no longer needs games."
DUPLICATE_WINDOW = 120.0  # s: a same-named worker heard from this recently is still alive
SPSA_CORE_BUDGET = 200_000.0  # an SPSA run gets at most this / sqrt(#params) cores

# Why a run was not given to a worker that asked (shown by /api/get_run).
NOT_APPROVED = "not approved yet"
TOO_MANY_THREADS = "needs more threads than the worker has cores"
TOO_FEW_THREADS = "uses fewer threads than the worker's min_threads"
NO_GAMES = "all its games are already assigned"
MEMORY = "needs more memory than the worker offers"
ARCH = "arch_filter excludes the worker's arch"
COMPILER = "pinned to another compiler"
SPSA_CAP = "SPSA core cap reached"
OUTRANKED = "outranked by another run (priority or share of cores)"


# How long the scheduler waits for a run busy committing results before it tries
# the next run in rank order. Waiting longer holds the one scheduler lock while
# result updates of that run commit, and request_task callers pile up at the
# gate ("too busy"). If every suitable run is busy, it waits for the best one.
RUN_LOCK_PATIENCE = 0.02
NEEDS_KEPT = 1000  # runs whose static needs are remembered before finished ones are dropped


def too_busy() -> dict[str, Any]:
    """The reply to a request_task refused by the admission gate."""
    return {"task_waiting": False, "info": TOO_BUSY}


class _RunBusy(Exception):  # noqa: N818 - a signal, not an error
    """A run's lock was not free within the scheduler's patience."""


@dataclass(frozen=True, slots=True)
class Assignment:
    state: RunState
    task: TaskRecord


@dataclass(frozen=True, slots=True)
class _Needs:
    """What a run asks of a worker that never changes while it runs (`/tests/modify`
    cannot touch these), worked out once instead of on every request_task."""

    threads: int
    hash_new: int  # MiB
    hash_base: int
    allowed_archs: Any
    compiler: str
    spsa_cap: float | None

    @classmethod
    def of(cls, args: dict[str, Any]) -> "_Needs":
        spsa = args.get("spsa")
        return cls(
            threads=int(args["threads"]),
            hash_new=hash_mib(args["new_options"]),
            hash_base=hash_mib(args["base_options"]),
            allowed_archs=args.get("allowed_archs"),
            compiler=str(args.get("compiler") or ""),
            spsa_cap=None
            if spsa is None
            else SPSA_CORE_BUDGET / math.sqrt(max(1, len(spsa["params"]))),
        )


class TaskScheduler:
    def __init__(
        self,
        context: RunContext,
        gate: threading.Semaphore,
        blocked: BlockedMachines,
        book_sri: Callable[[str], str | None] = lambda _name: None,
    ) -> None:
        self._context = context
        self._gate = gate
        self._blocked = blocked
        self._lock = threading.Lock()
        self._book_sri = book_sri
        self._needs: dict[str, _Needs] = {}  # by run id; guarded by self._lock

    def request_task(self, worker: WorkerInfo, user: User, remote_addr: str) -> dict[str, Any]:
        """The reply body of /api/request_task (without `duration`)."""
        with self.admitted() as entered:
            return self.assign_task(worker, user, remote_addr) if entered else too_busy()

    @contextmanager
    def admitted(self) -> Iterator[bool]:
        """The admission gate: whether this caller got in, without waiting.

        Never blocks, so the web layer passes it on the event loop and a caller
        that is refused is answered without taking a threadpool token."""
        entered = self._gate.acquire(blocking=False)
        try:
            yield entered
        finally:
            if entered:
                self._gate.release()

    def assign_task(self, worker: WorkerInfo, user: User, remote_addr: str) -> dict[str, Any]:
        """request_task for a caller inside the admission gate (threadpool).

        The new task's commit becomes durable after the scheduler's lock is
        released: the next caller decides while the disk syncs."""
        with self._context.storage.durable_on_exit(), self._lock:
            refusal = self._refusal(worker, user, remote_addr)
            if refusal is not None:
                return {"task_waiting": False, "error": refusal}
            assignment = self._assign(worker, remote_addr)
        if assignment is None:
            return {"task_waiting": False}
        return self._reply(assignment)

    # --- pre-checks (reference 4.2) ---

    def _refusal(self, worker: WorkerInfo, user: User, remote_addr: str) -> str | None:
        _, short = worker_names(worker)
        block_message = self._blocked.message(short)
        if block_message is not None:
            reason = f": {block_message}" if block_message else ""
            return (
                f"This worker ({short}) has been blocked{reason}. "
                f"An approver can unblock it at /workers/{short}."
            )
        if self._duplicate(worker, short):
            return f"There is already a worker running with name {short}."
        if self._context.registry.tasks_from(user.username, remote_addr) >= user.machine_limit:
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

    def _assign(self, worker: WorkerInfo, remote_addr: str) -> Assignment | None:
        _, short = worker_names(worker)
        previous = self._context.registry.last_run_of(short)
        previous_task = self._context.registry.active_task_of(short)
        ranked = _ranked(self._context.registry.states(), worker, previous)
        chosen: Assignment | None = None
        busy: list[RunState] = []
        for position, state in enumerate(ranked):
            reason = _unsuitable(state, self._needs_of(state), worker)
            if reason is not None:
                self._count_refusal(state, worker, reason)
                continue
            try:
                chosen = self._create_task(state, worker, remote_addr, RUN_LOCK_PATIENCE)
            except _RunBusy:
                busy.append(state)
            if chosen is not None:
                for outranked in ranked[position + 1 :]:  # suitable or not
                    if not outranked.run.workers:
                        self._count_refusal(outranked, worker)
                break
        if chosen is None and busy:
            chosen = self._create_task(busy[0], worker, remote_addr, patience=None)
        if chosen is not None and previous_task is not None:
            # The machine was restarted and lost its task: free its games.
            deactivate(self._context, *previous_task, "Stale active task")
        return chosen

    def _count_refusal(
        self, state: RunState, worker: WorkerInfo, reason: str | None = None
    ) -> None:
        """Why this run was not given to the worker, kept only while the run has no
        workers: only then are the reasons shown (`why_no_workers`), and skipping
        runs that have workers keeps request_task from examining every run."""
        if not state.run.workers:
            reason = reason or _unsuitable(state, self._needs_of(state), worker) or OUTRANKED
            state.refusals[reason] += 1

    def _needs_of(self, state: RunState) -> _Needs:
        needs = self._needs.get(state.run.id)
        if needs is None:
            if len(self._needs) > NEEDS_KEPT:  # forget finished runs now and then
                live = {s.run.id for s in self._context.registry.states()}
                self._needs = {k: v for k, v in self._needs.items() if k in live}
            needs = self._needs[state.run.id] = _Needs.of(state.run.args)
        return needs

    def _create_task(
        self, state: RunState, worker: WorkerInfo, remote_addr: str, patience: float | None
    ) -> Assignment | None:
        """A new task of `state` (None if it needs no more games). Raises `_RunBusy`
        when the run's lock is not free within `patience` seconds (None: wait)."""
        if not state.lock.acquire(timeout=-1 if patience is None else patience):
            raise _RunBusy
        try:
            run = state.run
            if run.finished or self._context.registry.get(run.id) is not state:
                return None
            size = _task_games(state, worker)
            if size <= 0:
                return None
            task = _new_task(state, worker, remote_addr, size, self._context.clock())
            change = Change(run)
            change.add_task(task)
            self._context.commit(state, change)
            state.refusals.clear()
        finally:
            state.lock.release()
        return Assignment(state, task)

    def _reply(self, assignment: Assignment) -> dict[str, Any]:
        run, task = assignment.state.run, assignment.task
        args = wire_args(run.args)
        args["book_sri"] = self._book_sri(str(args.get("book", ""))) or ""
        my_task = {"num_games": task.num_games, "start": task.start, "stats": results_view(task)}
        return {"run": {"_id": run.id, "args": args, "my_task": my_task}, "task_id": task.task_id}


def _ranked(states: list[RunState], worker: WorkerInfo, previous: str | None) -> list[RunState]:
    """Best first: higher priority; then runs without cores; then the run furthest
    below its share (cores relative to itp). A worker's previous run counts its
    cores, which steers it gently elsewhere. Ties keep the registry's order.

    Keys are built in one loop rather than by a key function: this runs for
    every unfinished run on every request_task."""
    half = worker.concurrency / 2
    keys = []
    for position, state in enumerate(states):
        run = state.run
        cores = run.cores + worker.concurrency if run.id == previous else run.cores
        share = (cores + half) / max(run.args.get("itp", 100.0), 1e-9)
        keys.append((-run.args.get("priority", 0.0), cores > 0, share, position))
    keys.sort()
    return [states[key[-1]] for key in keys]


def _unsuitable(state: RunState, needs: _Needs, worker: WorkerInfo) -> str | None:
    """The first reason this run cannot go to this worker (reference 4.4), or None.

    Checked one at a time: this runs for every unfinished run on every
    request_task, under the scheduler's lock."""
    run = state.run
    if not run.approved:
        return NOT_APPROVED
    mismatch = _mismatch(needs, worker)
    if mismatch is not None:
        return mismatch
    if int(run.args["num_games"]) - run.committed_games <= 0:
        return NO_GAMES
    if needs.spsa_cap is not None and run.cores > needs.spsa_cap:
        return SPSA_CAP
    return None


def _mismatch(needs: _Needs, worker: WorkerInfo) -> str | None:
    """Why this worker's machine can never play this run, or None."""
    if needs.threads > worker.concurrency:
        return TOO_MANY_THREADS
    if needs.threads < worker.min_threads:
        return TOO_FEW_THREADS
    hashes = needs.hash_new, needs.hash_base
    if memory_need(needs.threads, *hashes, worker.concurrency) > worker.max_memory:
        return MEMORY
    if needs.allowed_archs is not None and worker.worker_arch not in needs.allowed_archs:
        return ARCH
    if needs.compiler and needs.compiler != worker.compiler:
        return COMPILER
    return None


def _task_games(state: RunState, worker: WorkerInfo) -> int:
    run = state.run
    args = run.args
    remaining = int(args["num_games"]) - run.committed_games
    if remaining <= 0:
        return 0
    sprt = args.get("sprt")
    batch = int(sprt["batch_size"]) if sprt is not None else None
    tc = parse_time_control(args["tc"]).scheduling_tc()
    return task_size(tc, int(args["threads"]), worker.concurrency, remaining, batch)


def _new_task(
    state: RunState, worker: WorkerInfo, remote_addr: str, size: int, now: float
) -> TaskRecord:
    _, short = worker_names(worker)
    info = msgspec.to_builtins(worker)
    info["remote_addr"] = remote_addr
    info["country_code"] = "?"
    return TaskRecord(
        run_id=state.run.id,
        task_id=len(state.tasks),
        num_games=size,
        start=state.run.total_games,
        active=True,
        bad=False,
        last_updated=now,
        username=worker.username,
        worker_name=short,
        unique_key=worker.unique_key,
        remote_addr=remote_addr,
        worker_info=info,
        **no_results(),
        residual=None,
        spsa_params=None,
    )
