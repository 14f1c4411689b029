"""Periodic upkeep of live runs (run by the job scheduler, in its own executor):
reclaim tasks whose worker went silent, refresh each run's share (itp) and rates."""

from arbiter.domain.runs.documents import scheduling_ratio
from arbiter.domain.runs.ingest import deactivate
from arbiter.domain.runs.registry import LEASE_SECONDS, Change, RunContext, RunState
from arbiter.domain.time_control import parse_time_control
from arbiter.stats.scheduling import internal_throughput
from arbiter.storage.records import RunRecord, TaskRecord, evolve


def scavenge_dead_tasks(context: RunContext) -> int:
    """Deactivate tasks with no beat or update for LEASE_SECONDS; how many."""
    now = context.clock()
    message = f"no heartbeat for more than {LEASE_SECONDS:.0f} s"
    return sum(
        deactivate(context, run_id, task_id, message, action="dead_task")
        for run_id, task_id in context.registry.expired(now)
    )


def take_back_task_of(context: RunContext, short_name: str, message: str) -> int:
    """Deactivate the machine's active task, if it has one (its games go back to
    the run, as a failed task's do); how many (0 or 1)."""
    found = context.registry.active_task_of(short_name)
    if found is None:
        return 0
    run_id, task_id = found
    return int(deactivate(context, run_id, task_id, message, action="failed_task"))


def refresh_rates(context: RunContext) -> int:
    """Recompute itp, nps and games per minute of every live run; commits the
    runs whose values changed and returns how many."""
    states = context.registry.states()
    busy_runs_per_user: dict[str, int] = {}
    for state in states:
        if state.run.workers > 0:
            busy_runs_per_user[state.run.username] = (
                busy_runs_per_user.get(state.run.username, 0) + 1
            )
    changed = 0
    for state in states:
        with context.locked(state.run.id) as locked:
            if locked is None:
                continue
            updated = _with_rates(locked, busy_runs_per_user.get(locked.run.username, 0))
            if updated != locked.run:
                context.commit(locked, Change(updated))
                changed += 1
    return changed


def _cores(task: TaskRecord) -> int:
    return int(task.worker_info.get("concurrency", 0))


def _with_rates(state: RunState, same_user_busy: int) -> RunRecord:
    run = state.run
    spec = run.args
    sprt = spec.sprt
    itp = internal_throughput(
        spec.throughput,
        scheduling_ratio(spec),
        same_user_busy,
        run.wins + run.losses + run.draws,
        sprt_llr=None if sprt is None else float(sprt["llr"]),
        sprt_elo0=None if sprt is None else float(sprt["elo0"]),
    )
    threads = spec.threads
    duration = parse_time_control(spec.tc).game_duration()
    active = [task for task in state.tasks if task.active]
    nps = sum(
        float(t.worker_info.get("nps", 0.0)) * int(t.worker_info["concurrency"]) for t in active
    )
    per_minute = sum(60.0 / duration * (_cores(t) // threads) for t in active)
    # itp is kept as computed, as the reference keeps it: rounded, two runs whose
    # shares differ by less than the rounding could be ranked the other way round.
    # The same inputs give the same float, so an unchanged run is not rewritten.
    return evolve(
        run,
        nps=round(nps, 1),
        games_per_minute=round(per_minute, 2),
        args=evolve(spec, itp=itp),
    )
