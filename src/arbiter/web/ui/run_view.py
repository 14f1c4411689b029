"""What the run page shows beyond the run itself: the tasks table (sorted, paged,
with χ² residual colours), the χ² summary, the buttons the visitor may use, and
the modify form's values. Plain functions, run in the threadpool.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arbiter.domain.accounts import User
from arbiter.domain.runs.lifecycle import allowed_actions
from arbiter.domain.runs.queries import RunDetail
from arbiter.domain.runs.task_table import SORTS, TaskQuery, TaskSlice, worker_long_name
from arbiter.stats.purge import (
    Chi2Result,
    residual_color,
)
from arbiter.storage.records import TaskRecord
from arbiter.web.params import page_number, whole_number


@dataclass(frozen=True, slots=True)
class TaskRow:
    task: TaskRecord
    worker: str  # the long name, as in the actions log
    games: int
    residual: float | None
    residual_colour: str
    has_pgn: bool


@dataclass(frozen=True, slots=True)
class TasksPage:
    rows: list[TaskRow]
    bad: list[TaskRow]
    page: int
    pages: int
    sort: str
    descending: bool
    total: int
    worker: str = ""
    show_task: int | None = None
    show_all: bool = False


def _played(task: TaskRecord) -> int:
    return task.wins + task.losses + task.draws


def tasks_page(
    shown: TaskSlice, chi2: Chi2Result, pgn_ids: set[int], query: TaskQuery
) -> TasksPage:
    """The table's rows, with each worker's residual and its colour."""
    workers = len(chi2.residual) + len(chi2.excluded)
    return TasksPage(
        [_row(task, chi2, workers, pgn_ids) for task in shown.tasks],
        [_row(task, chi2, workers, pgn_ids) for task in shown.bad],
        shown.page,
        shown.pages,
        shown.sort,
        query.descending,
        shown.total,
        query.worker,
        query.show_task,
        query.show_all,
    )


def _row(task: TaskRecord, chi2: Chi2Result, workers: int, pgn_ids: set[int]) -> TaskRow:
    residual = chi2.residual.get(task.worker_name)
    colour = "" if residual is None else residual_color(residual, max(workers, 1))
    return TaskRow(
        task=task,
        worker=worker_long_name(task),
        games=_played(task),
        residual=residual,
        residual_colour=colour,
        has_pgn=task.task_id in pgn_ids,
    )


def modify_values(detail: RunDetail) -> dict[str, Any]:
    spec = detail.run.args
    return {
        "num_games": str(spec.num_games),
        "priority": f"{spec.priority:g}",
        "throughput": f"{spec.throughput:g}",
        "auto_purge": spec.auto_purge,
        "info": spec.info,
    }


def page_query(params: Mapping[str, str]) -> TaskQuery:
    """The tasks table's query from the query string (bad values ignored)."""
    sort = params.get("sort", "task")
    return TaskQuery(
        page=page_number(params.get("page", "1")),
        sort=sort if sort in SORTS else "task",
        descending=params.get("order") == "desc",
        worker=params.get("worker", "").strip()[:120],
        show_task=whole_number(params.get("show_task", "")),
        show_all=params.get("all") == "1",
    )


def actions_for(user: User | None, detail: RunDetail, self_approval: bool) -> frozenset[str]:
    return allowed_actions(user, detail.run, self_approval=self_approval)
