"""request_task: which run a worker should play next, and the task it gets (reference 4).

The seeds' admission gate comes first: a non-blocking semaphore, then one lock
for the whole decision, so at most TASK_SEMAPHORE_SIZE threadpool tokens ever
wait here and beats and result updates never queue behind scheduling.
Runs in the threadpool.
"""

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from arbiter.domain.accounts import User
from arbiter.domain.run_args import parse_time_control
from arbiter.domain.runs.documents import hash_mib, results_view
from arbiter.domain.runs.ingest import deactivate
from arbiter.domain.runs.registry import Change, RunContext, RunState
from arbiter.protocol.messages import WorkerInfo
from arbiter.protocol.workers import worker_names
from arbiter.stats.scheduling import memory_need, task_size
from arbiter.storage.records import TaskRecord

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


class _RunBusy(Exception):  # noqa: N818 - a signal, not an error
    """A run's lock was not free within the scheduler's patience."""


@dataclass(frozen=True, slots=True)
class Assignment:
    state: RunState
    task: TaskRecord


class TaskScheduler:
    def __init__(
        self,
        context: RunContext,
        gate: threading.Semaphore,
        book_sri: Callable[[str], str | None] = lambda _name: None,
    ) -> None:
        self._context = context
        self._gate = gate
        self._lock = threading.Lock()
        self._book_sri = book_sri

    def request_task(self, worker: WorkerInfo, user: User, remote_addr: str) -> dict[str, Any]:
        """The reply body of /api/request_task (without `duration`)."""
        if not self._gate.acquire(blocking=False):
            return {"task_waiting": False, "info": TOO_BUSY}
        try:
            with self._lock:
                refusal = self._refusal(worker, user, remote_addr)
                if refusal is not None:
                    return {"task_waiting": False, "error": refusal}
                assignment = self._assign(worker, remote_addr)
        finally:
            self._gate.release()
        if assignment is None:
            return {"task_waiting": False}
        return self._reply(assignment)

    # --- pre-checks (reference 4.2) ---

    def _refusal(self, worker: WorkerInfo, user: User, remote_addr: str) -> str | None:
        _, short = worker_names(worker)
        with self._context.storage.read() as tx:
            block = tx.worker_blocks.get(short)
        if block is not None and block.blocked:
            reason = f": {block.message}" if block.message else ""
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
        candidates = sorted(
            self._context.registry.states(), key=lambda s: _rank(s, worker, previous)
        )
        chosen: Assignment | None = None
        busy: list[RunState] = []
        for state in candidates:
            reason = _unsuitable(state, worker)
            if reason is not None:
                state.refusals[reason] += 1
            elif chosen is not None:
                state.refusals[OUTRANKED] += 1
            else:
                try:
                    chosen = self._create_task(state, worker, remote_addr, RUN_LOCK_PATIENCE)
                except _RunBusy:
                    busy.append(state)
        if chosen is None and busy:
            chosen = self._create_task(busy[0], worker, remote_addr, patience=None)
        if chosen is not None and previous_task is not None:
            # The machine was restarted and lost its task: free its games.
            deactivate(self._context, *previous_task, "Stale active task")
        return chosen

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
        args = {k: v for k, v in run.args.items() if k != "allowed_archs"}
        if "spsa" in args:
            args["spsa"] = {**args["spsa"], "param_history": []}
        args["book_sri"] = self._book_sri(str(args.get("book", ""))) or ""
        my_task = {"num_games": task.num_games, "start": task.start, "stats": results_view(task)}
        return {"run": {"_id": run.id, "args": args, "my_task": my_task}, "task_id": task.task_id}


def _rank(state: RunState, worker: WorkerInfo, previous: str | None) -> tuple[float, bool, float]:
    """Higher priority first; then runs without cores; then the run furthest below
    its share (cores relative to itp). A worker's previous run counts its cores,
    which steers it gently elsewhere."""
    run = state.run
    cores = run.cores + (worker.concurrency if run.id == previous else 0)
    itp = max(float(run.args.get("itp", 100.0)), 1e-9)
    share = (cores + worker.concurrency / 2) / itp
    return (-float(run.args.get("priority", 0.0)), cores > 0, share)


def _unsuitable(state: RunState, worker: WorkerInfo) -> str | None:
    """The first reason this run cannot go to this worker (reference 4.4), or None."""
    run = state.run
    args = run.args
    threads = int(args["threads"])
    allowed = args.get("allowed_archs")
    need = memory_need(
        threads, hash_mib(args["new_options"]), hash_mib(args["base_options"]), worker.concurrency
    )
    checks = (
        (not run.approved, NOT_APPROVED),
        (threads > worker.concurrency, TOO_MANY_THREADS),
        (threads < worker.min_threads, TOO_FEW_THREADS),
        (int(args["num_games"]) - run.committed_games <= 0, NO_GAMES),
        (need > worker.max_memory, MEMORY),
        (allowed is not None and worker.worker_arch not in allowed, ARCH),
        (bool(args.get("compiler")) and args.get("compiler") != worker.compiler, COMPILER),
        ("spsa" in args and run.cores > _spsa_cap(args), SPSA_CAP),
    )
    return next((reason for failed, reason in checks if failed), None)


def _spsa_cap(args: dict[str, Any]) -> float:
    return SPSA_CORE_BUDGET / math.sqrt(max(1, len(args["spsa"]["params"])))


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
        wins=0,
        losses=0,
        draws=0,
        crashes=0,
        time_losses=0,
        pentanomial=[0, 0, 0, 0, 0],
        residual=None,
        spsa_params=None,
    )
