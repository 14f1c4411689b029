"""Run aggregates as sums over tasks, kept incrementally and checkable from scratch.

A run's counters (workers, cores, committed and total games, results) are
derivable from its tasks. Each task change applies the difference of that
task's contribution; `recompute` rebuilds them from all tasks, which start-up
uses to verify and repair what storage holds.
"""

from dataclasses import dataclass, fields
from typing import Any

from arbiter.storage.records import RunRecord, TaskRecord, evolve


@dataclass(frozen=True, slots=True)
class Contribution:
    workers: int = 0
    cores: int = 0
    committed_games: int = 0
    total_games: int = 0
    wins: int = 0
    losses: int = 0
    draws: int = 0
    crashes: int = 0
    time_losses: int = 0
    pentanomial: tuple[int, ...] = (0, 0, 0, 0, 0)


# The run's fields that sum its tasks' contributions (pentanomial last), and
# their values for a run without tasks.
AGGREGATE_FIELDS = tuple(field.name for field in fields(Contribution))
NO_AGGREGATES: dict[str, Any] = {name: getattr(Contribution(), name) for name in AGGREGATE_FIELDS}


def games_played(task: TaskRecord) -> int:
    return task.wins + task.losses + task.draws


def contribution(task: TaskRecord | None) -> Contribution:
    """What one task adds to its run: an active task reserves all its games."""
    if task is None:
        return Contribution()
    active = task.active
    return Contribution(
        workers=1 if active else 0,
        cores=int(task.worker_info.get("concurrency", 0)) if active else 0,
        committed_games=task.num_games if active else games_played(task),
        total_games=task.num_games,
        wins=task.wins,
        losses=task.losses,
        draws=task.draws,
        crashes=task.crashes,
        time_losses=task.time_losses,
        pentanomial=task.pentanomial,
    )


def apply_change(run: RunRecord, old: TaskRecord | None, new: TaskRecord | None) -> RunRecord:
    """The run after one task went from `old` to `new` (None: absent)."""
    before, after = contribution(old), contribution(new)
    changes: dict[str, object] = {}
    for name in AGGREGATE_FIELDS[:-1]:
        delta = getattr(after, name) - getattr(before, name)
        if delta:
            changes[name] = getattr(run, name) + delta
    if before.pentanomial != after.pentanomial:
        triples = zip(run.pentanomial, after.pentanomial, before.pentanomial, strict=True)
        changes["pentanomial"] = tuple(total + a - b for total, a, b in triples)
    return evolve(run, **changes) if changes else run


def recompute(run: RunRecord, tasks: list[TaskRecord]) -> RunRecord:
    """The run with every aggregate rebuilt from `tasks`."""
    zeroed = evolve(run, **NO_AGGREGATES)
    for task in tasks:
        zeroed = apply_change(zeroed, None, task)
    return zeroed


def differences(stored: RunRecord, recomputed: RunRecord) -> dict[str, tuple[object, object]]:
    """field -> (stored, recomputed) for every aggregate that disagrees."""
    return {
        name: (getattr(stored, name), getattr(recomputed, name))
        for name in AGGREGATE_FIELDS
        if getattr(stored, name) != getattr(recomputed, name)
    }
