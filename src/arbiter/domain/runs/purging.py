"""Purging: taking the results of misbehaving workers out of a run.

A task is bad when its worker's results are a χ² outlier among the run's
workers, or when it ended after crashes or time losses (stats.purge). Purged
tasks keep their row, marked `bad`, with their results zeroed, so the run's
totals (sums over tasks) lose exactly their games; a copy of each as it was
goes to the run's bad tasks (`bad_tasks.py`), as the reference keeps them.

Used by a person's purge, and by `auto_purge` runs when they are decided or
stopped. Callers hold the run's lock (threadpool).
"""

from arbiter.domain.runs import bad_tasks as bad_copies
from arbiter.domain.runs import history
from arbiter.domain.runs.outcome import run_action
from arbiter.domain.runs.registry import Change, RunState
from arbiter.stats.purge import aggregate_rows, bad_workers, crash_or_time, worker_row
from arbiter.stats.sprt import sprt_results, update_sprt
from arbiter.storage.records import RunRecord, TaskRecord, evolve, no_results


def bad_tasks(tasks: list[TaskRecord]) -> list[TaskRecord]:
    """Tasks of workers whose results are outliers (χ²), or that crashed or lost on time."""
    live = [t for t in tasks if not t.bad]
    rows = aggregate_rows(
        (t.worker_name, worker_row(t.wins, t.losses, t.draws, t.pentanomial)) for t in live
    )
    outliers = bad_workers(rows)
    return [
        t
        for t in live
        if t.worker_name in outliers
        or (not t.active and crash_or_time(t.wins + t.losses + t.draws, t.crashes, t.time_losses))
    ]


def purge_into(state: RunState, change: Change) -> int:
    """Fold the purge of every bad task into `change`; returns how many were purged.

    SPSA runs are never purged: their parameters already moved with those games.
    """
    if change.run.args.spsa is not None:
        return 0
    current = [change.current(task) for task in state.tasks]
    bad = bad_tasks(current)
    if not bad:
        return 0
    change.purged.extend(bad_copies.copies(current, bad))
    for task in bad:
        change.save_task(task, purged(task))
    change.run = history.record(rescore(change.run))
    return len(bad)


def purge_machine_into(state: RunState, change: Change, worker_name: str) -> int:
    """Fold the purge of every good task of one machine into `change` (an approver
    purging a quarantined machine); how many. SPSA runs are never purged."""
    if change.run.args.spsa is not None:
        return 0
    current = [change.current(task) for task in state.tasks]
    bad = [task for task in current if not task.bad and task.worker_name == worker_name]
    if not bad:
        return 0
    change.purged.extend(bad_copies.copies(current, bad))
    for task in bad:
        change.save_task(task, purged(task))
    change.run = history.record(rescore(change.run))
    return len(bad)


def auto_purges(run: RunRecord) -> bool:
    return run.args.auto_purge and run.args.spsa is None


def auto_purge_action(run: RunRecord, now: float, count: int) -> dict[str, object]:
    """The `purge_run` action an automatic purge writes (by the system user)."""
    return run_action(run, "purge_run", "", f"auto-purged {count} task(s)", now)


def purged(task: TaskRecord) -> TaskRecord:
    return evolve(task, active=False, bad=True, spsa_params=None, **no_results())


def rescore(run: RunRecord) -> RunRecord:
    """An SPRT's LLR after its samples changed outside the batch rhythm (a purge)."""
    sprt = run.args.sprt
    if sprt is None:
        return run
    counts = sprt_results(sprt["elo_model"], run.wins, run.losses, run.draws, run.pentanomial)
    fresh = update_sprt({**sprt, "state": ""}, counts)
    return evolve(run, args=evolve(run.args, sprt=fresh))
