"""What the run page shows beyond the run itself: the tasks table (sorted, paged,
with χ² residual colours), the χ² summary, the buttons the visitor may use, and
the modify form's values. Plain functions, run in the threadpool.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from arbiter.domain.accounts import User
from arbiter.domain.runs.ingest import task_worker_name
from arbiter.domain.runs.lifecycle import allowed_actions
from arbiter.domain.runs.queries import RunDetail
from arbiter.stats.purge import (
    Chi2Result,
    residual_color,
)
from arbiter.storage.records import TaskRecord
from arbiter.web.params import page_number, whole_number

TASKS_PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class TaskRow:
    task: TaskRecord
    worker: str  # the long name, as in the actions log
    games: int
    residual: float | None
    residual_colour: str
    has_pgn: bool


@dataclass(frozen=True, slots=True)
class TasksQuery:
    """How the tasks table was asked for: page, order, one worker's tasks only,
    one task to show (its page, highlighted: `?show_task=N`), or every task."""

    page: int = 1
    sort: str = "task"
    descending: bool = False
    worker: str = ""
    show_task: int | None = None
    show_all: bool = False


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


# Sort keys of tasks, given the run's residuals by worker: rows are built only
# for the page shown (a run may hold thousands of tasks).
SORTS: dict[str, Callable[[TaskRecord, Mapping[str, float]], Any]] = {
    "task": lambda task, _: task.task_id,
    "worker": lambda task, _: task_worker_name(task).lower(),
    "games": lambda task, _: _played(task),
    "updated": lambda task, _: task.last_updated,
    "crashes": lambda task, _: (task.crashes, task.time_losses),
    "residual": lambda task, residual: residual.get(task.worker_name, -1.0),
}


def tasks_page(
    tasks: list[TaskRecord],
    chi2: Chi2Result,
    pgn_ids: set[int],
    query: TasksQuery | None = None,
) -> TasksPage:
    query = query or TasksQuery()
    workers = len(chi2.residual) + len(chi2.excluded)
    good = [task for task in tasks if not task.bad]
    if query.worker:
        key = query.worker.casefold()
        good = [task for task in good if key in task_worker_name(task).casefold()]
    sort = query.sort if query.sort in SORTS else "task"
    order = SORTS[sort]
    good.sort(key=lambda task: order(task, chi2.residual), reverse=query.descending)
    size = max(len(good), 1) if query.show_all else TASKS_PER_PAGE
    pages = max(1, -(-len(good) // size))
    page = query.page
    if query.show_task is not None:  # the page that holds the task asked for
        index = next((i for i, t in enumerate(good) if t.task_id == query.show_task), None)
        page = page if index is None else index // size + 1
    page = min(max(page, 1), pages)
    start = (page - 1) * size
    shown = [_row(task, chi2, workers, pgn_ids) for task in good[start : start + size]]
    bad = [_row(task, chi2, workers, pgn_ids) for task in tasks if task.bad]
    return TasksPage(
        shown,
        bad,
        page,
        pages,
        sort,
        query.descending,
        len(good),
        query.worker,
        query.show_task,
        query.show_all,
    )


def _row(task: TaskRecord, chi2: Chi2Result, workers: int, pgn_ids: set[int]) -> TaskRow:
    residual = chi2.residual.get(task.worker_name)
    colour = "" if residual is None else residual_color(residual, max(workers, 1))
    return TaskRow(
        task=task,
        worker=task_worker_name(task),
        games=_played(task),
        residual=residual,
        residual_colour=colour,
        has_pgn=task.task_id in pgn_ids,
    )


def modify_values(detail: RunDetail) -> dict[str, Any]:
    args = detail.run.args
    return {
        "num_games": str(args["num_games"]),
        "priority": f"{float(args['priority']):g}",
        "throughput": f"{float(args['throughput']):g}",
        "auto_purge": bool(args["auto_purge"]),
        "info": str(args["info"]),
    }


def page_query(params: Mapping[str, str]) -> TasksQuery:
    """The tasks table's query from the query string (bad values ignored)."""
    sort = params.get("sort", "task")
    return TasksQuery(
        page=page_number(params.get("page", "1")),
        sort=sort if sort in SORTS else "task",
        descending=params.get("order") == "desc",
        worker=params.get("worker", "").strip()[:120],
        show_task=whole_number(params.get("show_task", "")),
        show_all=params.get("all") == "1",
    )


def actions_for(user: User | None, detail: RunDetail, self_approval: bool) -> frozenset[str]:
    return allowed_actions(user, detail.run, self_approval=self_approval)
