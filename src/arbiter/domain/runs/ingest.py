"""What workers report about their tasks: results, beats, failures, stop requests, logs.

`update_task` is the durable heart: the task's cumulative stats, the run's
totals, its SPRT state and any SPSA step are committed in one transaction
before the reply, so a worker told "saved" is never contradicted by a crash.
A repeated identical update is recognised and changes nothing. As in the
reference, counts that contradict each other are a 400 that changes nothing,
while consistent counts that cannot follow the stored ones (fewer games, off
the SPRT batch) kill the task with a 200 + `error`.

Everything here runs in the threadpool, under the run's own lock: updates of
different runs proceed in parallel and never wait for the scheduler.
"""

from dataclasses import dataclass
from typing import Any

from arbiter.domain import actions
from arbiter.domain.errors import BadRequest, Unauthorized
from arbiter.domain.profile_fields import same_username
from arbiter.domain.runs import history
from arbiter.domain.runs.documents import run_label
from arbiter.domain.runs.outcome import finish, is_decided, run_action
from arbiter.domain.runs.purging import auto_purge_action, auto_purges, purge_into
from arbiter.domain.runs.registry import Change, RunContext, RunState
from arbiter.domain.runs.spsa_steps import apply_spsa_result, perturbation
from arbiter.domain.runs.task_table import worker_long_name
from arbiter.domain.runs.totals import games_played
from arbiter.protocol.messages import SpsaResult, Stats, WorkerInfo
from arbiter.protocol.workers import worker_names
from arbiter.stats.purge import crash_or_time
from arbiter.stats.results import result_problems
from arbiter.stats.sprt import sprt_results, update_sprt
from arbiter.storage.base import NewAction
from arbiter.storage.records import RunRecord, TaskRecord, evolve
from arbiter.storage.run_spec import RunSpec

STOP_RUN_CPU_HOURS = 1000.0  # a worker's user needs this much contributed to stop a run


@dataclass(frozen=True, slots=True)
class ResultUpdate:
    """One update_task call: the worker's cumulative stats of its task."""

    worker: WorkerInfo
    run_id: str
    task_id: int
    stats: Stats
    spsa: SpsaResult | None = None


def not_active(run_id: str, task_id: int) -> dict[str, Any]:
    return {"task_alive": False, "info": f"task {run_id}/{task_id} is not active"}


def handed_to(task: TaskRecord, worker: WorkerInfo) -> bool:
    """Whether the task was handed to this worker process: its unique key, under
    any spelling of its account's name."""
    return task.unique_key == worker.unique_key and same_username(task.username, worker.username)


def owned_task(state: RunState, task_id: int, worker: WorkerInfo) -> TaskRecord:
    """The task, if it exists and belongs to this worker process (400 otherwise)."""
    if task_id >= len(state.tasks):
        raise BadRequest(f"Invalid task_id {task_id} for run {state.run.id}")
    task = state.tasks[task_id]
    if not handed_to(task, worker):
        raise BadRequest(f"Invalid unique_key for task {state.run.id}/{task_id}")
    return task


def deactivate(
    context: RunContext, run_id: str, task_id: int, message: str, action: str = "failed_task"
) -> bool:
    """Take a task away from its worker (stale or dead); False if it was not active."""
    with context.locked(run_id) as state:
        if state is None:
            return False
        change = Change(state.run)
        if not retire_task(state, change, task_id, message, now=context.clock(), action=action):
            return False
        context.commit(state, change)
        return True


def retire_task(
    state: RunState,
    change: Change,
    task_id: int,
    message: str,
    *,
    now: float,
    action: str = "failed_task",
) -> bool:
    """Add to `change` (of `state`, whose lock the caller holds) the task's taking
    away, with its action; False if the task is not active."""
    if task_id >= len(state.tasks):
        return False
    task = change.current(state.tasks[task_id])
    if not task.active:
        return False
    change.save_task(task, evolve(task, active=False, spsa_params=None))
    where = {"task_id": task_id, "worker": worker_long_name(task)}
    change.log.append(run_action(change.run, action, task.username, message, now, **where))
    return True


class ResultIngest:
    def __init__(self, context: RunContext) -> None:
        self._context = context

    # --- update_task ---

    def update_task(
        self,
        worker: WorkerInfo,
        run_id: str,
        task_id: int,
        stats: Stats,
        spsa: SpsaResult | None = None,
    ) -> dict[str, Any]:
        return self.update_alone(ResultUpdate(worker, run_id, task_id, stats, spsa))

    def update_alone(self, update: ResultUpdate) -> dict[str, Any]:
        """One update_task in a transaction of its own (update_task's body)."""
        check_consistent(update.stats)
        with self._context.locked(update.run_id) as state:
            if state is None:
                return self._gone(update.worker, update.run_id, update.task_id)
            change = Change(state.run)
            reply = self.apply_update(state, change, update)
            if change.saved or change.log:
                self._context.commit(state, change)
            return reply

    def apply_update(self, state: RunState, change: Change, update: ResultUpdate) -> dict[str, Any]:
        """Fold one update_task into `change` (of `state`, whose lock the caller
        holds; consistent stats); the reply once `change` is committed. Updates
        chain: each reads the task and the run as the change leaves them."""
        worker, task_id, stats = update.worker, update.task_id, update.stats
        task = change.current(owned_task(state, task_id, worker))
        if not task.active:
            return not_active(state.run.id, task_id)
        self._context.registry.renew(state.run.id, task_id)
        if _same_stats(task, stats):
            return {"task_alive": True}
        problem = _stats_problem(change.run, task, stats)
        if problem is not None:
            self._kill_into(change, task, worker, problem)
            return {"task_alive": False, "error": f"{state.run.id}/{task_id}: {problem}"}
        self._ingest(state, change, task, update)
        alive = change.current(task).active and not change.run.finished
        sprt = change.run.args.sprt
        if sprt is None:
            return {"task_alive": alive}
        # An added key (the reference sends none): the run's LLR now, which
        # Arbiter's worker shows; the official worker reads only task_alive.
        return {"task_alive": alive, "llr": sprt["llr"]}

    def _ingest(
        self, state: RunState, change: Change, task: TaskRecord, update: ResultUpdate
    ) -> None:
        now = self._context.clock()
        stats, spsa, worker = update.stats, update.spsa, update.worker
        played = stats.wins + stats.losses + stats.draws
        new_task = evolve(
            task,
            worker_info=measured_worker_info(task.worker_info, worker),
            wins=stats.wins,
            losses=stats.losses,
            draws=stats.draws,
            crashes=stats.crashes,
            time_losses=stats.time_losses,
            pentanomial=tuple(stats.pentanomial),
            last_updated=now,
            active=played < task.num_games,
        )
        if spsa is not None and change.run.args.spsa is not None:
            change.run, new_task = apply_spsa_result(change.run, task, new_task, spsa)
        change.save_task(task, new_task)
        note = None if new_task.active else crash_note(new_task)
        if note is not None:  # completed after too many crashes or time losses, as the reference
            where = {"task_id": task.task_id, "worker": worker_long_name(task)}
            change.log.append(
                run_action(change.run, "crash_or_time", task.username, note, now, **where)
            )
        run = change.run
        spec = _advanced_sprt(run)
        change.run = evolve(run, args=spec, results_history=history.advanced(run, spec))
        if is_decided(change.run) and auto_purges(change.run):
            count = purge_into(state, change)
            if count:  # the run goes on if the purge took its decision away
                change.log.append(auto_purge_action(change.run, now, count))
        if is_decided(change.run):
            finish(state, change, now=now)

    def _kill_into(self, change: Change, task: TaskRecord, worker: WorkerInfo, why: str) -> None:
        change.save_task(task, evolve(task, active=False, spsa_params=None))
        long_name, _ = worker_names(worker)
        now = self._context.clock()
        change.log.append(
            run_action(
                change.run,
                "failed_task",
                worker.username,
                why,
                now,
                task_id=task.task_id,
                worker=long_name,
            )
        )

    def _gone(self, worker: WorkerInfo, run_id: str, task_id: int) -> dict[str, Any]:
        """The run is not live (finished, or never existed): say which."""
        with self._context.storage.read() as tx:
            run = tx.runs.get(run_id)
            task = tx.tasks.get(run_id, task_id) if run is not None else None
        if run is None:
            raise BadRequest(f"Invalid run_id: {run_id}")
        if task is None:
            raise BadRequest(f"Invalid task_id {task_id} for run {run_id}")
        if not handed_to(task, worker):
            raise BadRequest(f"Invalid unique_key for task {run_id}/{task_id}")
        return not_active(run_id, task_id)

    # --- request_spsa, beat, failed_task, stop_run, worker_log ---

    def request_spsa(self, worker: WorkerInfo, run_id: str, task_id: int) -> dict[str, Any]:
        """Parameter values for the next SPSA batch; the flips are kept on the task."""
        with self._context.locked(run_id) as state:
            if state is None:
                return self._gone(worker, run_id, task_id)
            task = owned_task(state, task_id, worker)
            if not task.active:
                return not_active(run_id, task_id)
            if state.run.args.spsa is None:
                raise BadRequest(f"Run {run_id} is not an SPSA run")
            reply, stored = perturbation(state.run)
            change = Change(state.run)
            change.save_task(task, evolve(task, spsa_params=stored))
            self._context.commit(state, change)
            return {**reply, "task_alive": True}

    def worker_log(
        self, worker: WorkerInfo, message: str, run_id: str | None, task_id: int | None
    ) -> dict[str, Any]:
        long_name, _ = worker_names(worker)
        entry: dict[str, Any] = {
            "time": self._context.clock(),
            "action": "worker_log",
            "username": worker.username,
            "message": message,
            "worker": long_name,
        }
        if run_id is not None and task_id is not None:
            self.check_owner(worker, run_id, task_id)
            entry.update(run_id=run_id, run=self._label(run_id), task_id=task_id)
        with self._context.storage.write() as tx:
            actions.record(tx, NewAction(**entry))
        return {}

    def check_owner(self, worker: WorkerInfo, run_id: str, task_id: int) -> None:
        state = self._context.registry.get(run_id)
        if state is not None:
            owned_task(state, task_id, worker)
        else:
            self._gone(worker, run_id, task_id)

    def _label(self, run_id: str) -> str:
        state = self._context.registry.get(run_id)
        if state is not None:
            return run_label(run_id, state.run.args.new_tag)
        with self._context.storage.read() as tx:
            run = tx.runs.get(run_id)
        return run_label(run_id, "" if run is None else run.args.new_tag)

    def beat(self, worker: WorkerInfo, run_id: str, task_id: int) -> dict[str, Any]:
        """Renews the lease in memory only: losing a beat to a crash costs nothing."""
        reply = self.beat_live(worker, run_id, task_id)
        return self._gone(worker, run_id, task_id) if reply is None else reply

    def beat_live(self, worker: WorkerInfo, run_id: str, task_id: int) -> dict[str, Any] | None:
        """A beat for a run in memory, None for one that is not (see `beat`).

        Takes no run lock: tasks are immutable records swapped in whole by
        `Registry.publish`, so reading one is atomic, and the registry's own
        mutex is never held for I/O. Beats therefore never wait behind result
        commits, and this is safe to call on the event loop.
        """
        state = self._context.registry.get(run_id)
        if state is None:
            return None
        task = owned_task(state, task_id, worker)
        if not task.active:
            return not_active(run_id, task_id)
        self._context.registry.renew(run_id, task_id)
        return {"task_alive": True}

    def failed_task(
        self, worker: WorkerInfo, run_id: str, task_id: int, message: str
    ) -> dict[str, Any]:
        with self._context.locked(run_id) as state:
            if state is None:
                return self._gone(worker, run_id, task_id)
            task = owned_task(state, task_id, worker)
            if not task.active:
                return not_active(run_id, task_id)
            change = Change(state.run)
            change.save_task(task, evolve(task, active=False, spsa_params=None))
            long_name, _ = worker_names(worker)
            now = self._context.clock()
            where = {"task_id": task_id, "worker": long_name}
            change.log.append(
                run_action(state.run, "failed_task", worker.username, message, now, **where)
            )
            note = crash_note(task)
            if note is not None:
                change.log.append(
                    run_action(state.run, "crash_or_time", worker.username, note, now, **where)
                )
            self._context.commit(state, change)
            return {}

    def stop_run(
        self, worker: WorkerInfo, run_id: str, task_id: int, message: str, cpu_hours: float
    ) -> dict[str, Any]:
        """A worker asks to stop the whole run (bad signature, illegal moves...).

        Only users with enough contributed CPU time may; others just lose the task.
        """
        with self._context.locked(run_id) as state:
            if state is None:
                self._gone(worker, run_id, task_id)
                raise Unauthorized(f"Run {run_id} is already finished.")
            task = owned_task(state, task_id, worker)
            long_name, _ = worker_names(worker)
            now = self._context.clock()
            where = {"task_id": task_id, "worker": long_name}
            change = Change(state.run)
            if cpu_hours < STOP_RUN_CPU_HOURS:
                if task.active:
                    change.save_task(task, evolve(task, active=False, spsa_params=None))
                refused = f"{message} (not authorized)"
                change.log.append(
                    run_action(state.run, "stop_run", worker.username, refused, now, **where)
                )
                self._context.commit(state, change)
                raise Unauthorized(
                    f"User {worker.username} has too few CPU hours to stop run {run_id}."
                )
            change.run = evolve(state.run, failed=True, failures=state.run.failures + 1)
            finish(state, change, now=now)
            change.log[-1] = run_action(
                state.run, "stop_run", worker.username, message, now, **where
            )
            self._context.commit(state, change)
            return {}


def crash_note(task: TaskRecord) -> str | None:
    """The crash_or_time message of a task with games and too many crashes or time
    losses, in the reference's words (people grep its log); None otherwise."""
    games, losses, crashes = games_played(task), task.time_losses, task.crashes
    if not games or not crash_or_time(games, crashes, losses):
        return None
    return f"Time losses:{losses}({losses / games:.1%}) Crashes:{crashes}({crashes / games:.1%})"


def _same_stats(task: TaskRecord, stats: Stats) -> bool:
    return (
        task.wins == stats.wins
        and task.losses == stats.losses
        and task.draws == stats.draws
        and task.crashes == stats.crashes
        and task.time_losses == stats.time_losses
        and task.pentanomial == tuple(stats.pentanomial)
    )


def check_consistent(stats: Stats) -> None:
    """Refuse (400) counts that contradict each other, before the task is read.

    The reference's request schema rejects them, so its worker gets a 400 and
    its task stays active, untouched (not even its lease is renewed).
    """
    problems = result_problems(stats.wins, stats.losses, stats.draws, stats.pentanomial)
    if problems:
        raise BadRequest("incompatible stats: " + "; ".join(problems))


def _stats_problem(run: RunRecord, task: TaskRecord, stats: Stats) -> str | None:
    """Why these stats (consistent in themselves) cannot follow the stored ones, or
    None. The reference answers these with 200 + `error` and a dead task."""
    sprt = run.args.sprt
    batch = int(sprt["batch_size"]) if sprt is not None else None
    problems = result_problems(stats.wins, stats.losses, stats.draws, stats.pentanomial, batch)
    if problems:
        return "incompatible stats: " + "; ".join(problems)
    old = (task.wins, task.losses, task.draws, task.crashes, task.time_losses, *task.pentanomial)
    new = (stats.wins, stats.losses, stats.draws, stats.crashes, stats.time_losses)
    if any(n < o for n, o in zip((*new, *stats.pentanomial), old, strict=True)):
        return "incompatible stats: a cumulative count went down"
    played = stats.wins + stats.losses + stats.draws
    if played > task.num_games:
        return f"incompatible stats: {played} games played in a task of {task.num_games}"
    return None


def _advanced_sprt(run: RunRecord) -> RunSpec:
    """The run's spec with its SPRT advanced to its current results (the same
    spec when it has no SPRT running)."""
    sprt = run.args.sprt
    if sprt is None or sprt.get("state"):
        return run.args
    counts = sprt_results(sprt["elo_model"], run.wins, run.losses, run.draws, run.pentanomial)
    return evolve(run.args, sprt=update_sprt(sprt, counts))


def measured_worker_info(stored: dict[str, Any], worker: WorkerInfo) -> dict[str, Any]:
    """The task's worker_info with the speed and CPU features the worker sends with
    its results (the official worker measures them when its task starts, after
    request_task), as the reference keeps them, and the nps Arbiter's worker
    measured in the task's games (`game_nps`, kept once sent); the same object
    when they have not changed, so the update does not rewrite the column."""
    game_nps = worker.game_nps or stored.get("game_nps")
    if (
        stored.get("nps") == worker.nps
        and stored.get("ARCH") == worker.ARCH
        and stored.get("game_nps") == game_nps
    ):
        return stored
    measured = {**stored, "nps": worker.nps, "ARCH": worker.ARCH}
    if game_nps:
        measured["game_nps"] = game_nps
    return measured
