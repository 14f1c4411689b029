"""Purged tasks as they were before the purge zeroed their results.

The reference keeps a copy of every purged task in the run's `bad_tasks` list,
in the order they were purged, and `/api/get_task/<run>/<n>bad` shows entry n.
Our purged task rows keep no results (totals are sums over tasks), so the
copies live in one document per run in the key/value store, appended in the
purge's own transaction. A copy is stored as `get_task` shows it (worker
identity already masked), with the purge's residual and its colour.
"""

from collections.abc import Iterable
from typing import Any

from arbiter.domain.runs.documents import task_view
from arbiter.stats.purge import (
    CRASH_RESIDUAL,
    aggregate_rows,
    chi2_residuals,
    crash_or_time,
    residual_color,
    worker_row,
)
from arbiter.storage import Tx
from arbiter.storage.records import TaskRecord, evolve


def _key(run_id: str) -> str:
    return f"bad_tasks/{run_id}"


def copies(tasks: list[TaskRecord], bad: Iterable[TaskRecord]) -> list[dict[str, Any]]:
    """The copies of the `bad` tasks among `tasks` (as they are before the purge),
    in the reference's order: crashes and time losses first, then χ² outliers."""
    live = [t for t in tasks if not t.bad]
    chi2 = chi2_residuals(
        aggregate_rows(
            (t.worker_name, worker_row(t.wins, t.losses, t.draws, t.pentanomial)) for t in live
        )
    )
    workers = max(len(chi2.residual) + len(chi2.excluded), 1)
    found = []
    for task in bad:
        if _crashed(task):
            residual, colour = CRASH_RESIDUAL, "red"
        else:
            residual = chi2.residual.get(task.worker_name, float("inf"))
            colour = residual_color(residual, workers)
        found.append((not _crashed(task), task.task_id, _copy(task, residual, colour)))
    return [copy for _, _, copy in sorted(found, key=lambda item: item[:2])]


def append(tx: Tx, run_id: str, new: list[dict[str, Any]]) -> None:
    """Add a purge's copies after the run's earlier ones (caller holds the run's lock)."""
    stored = tx.kv.get(_key(run_id)) or []
    tx.kv.set(_key(run_id), [*stored, *new])


def get(tx: Tx, run_id: str, index: int) -> dict[str, Any] | None:
    """Copy `index` (0 for the first task purged), or None."""
    stored = tx.kv.get(_key(run_id)) or []
    return stored[index] if 0 <= index < len(stored) else None


def _crashed(task: TaskRecord) -> bool:
    games = task.wins + task.losses + task.draws
    return not task.active and crash_or_time(games, task.crashes, task.time_losses)


def _copy(task: TaskRecord, residual: float, colour: str) -> dict[str, Any]:
    view = task_view(evolve(task, active=False, bad=True, residual=residual))
    return {**view, "residual_color": colour}
