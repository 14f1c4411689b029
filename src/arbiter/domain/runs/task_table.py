"""The run page's table of tasks: one page of a run's good tasks in the order
asked for, its worker filter, and the purged tasks beside it.

A live run's tasks are in memory and are paged there. A stored run's are paged
by the database (`TaskStore.page_of_run`): only the page's rows are read and
decoded, so a run of 5,000 tasks costs what one of 50 does. What SQL cannot
order or filter by (a worker's long name, the χ² residual of the moment) is
done over light rows (`TaskLight`) and then only the page's records are read.
Plain functions: they run in the threadpool.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from arbiter.protocol.workers import long_from_short, long_worker_name
from arbiter.storage import Tx
from arbiter.storage.base import TaskLight, TaskOrder
from arbiter.storage.records import TaskRecord

TASKS_PER_PAGE = 50
SQL_ORDERS: dict[str, TaskOrder] = {
    "task": "task",
    "worker": "worker",
    "games": "games",
    "updated": "updated",
    "crashes": "crashes",
}
SORTS = (*SQL_ORDERS, "residual")


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """How the table was asked for: page, order, one worker's tasks only, one
    task to show (its page: `?show_task=N`), or every task on one page."""

    page: int = 1
    sort: str = "task"
    descending: bool = False
    worker: str = ""
    show_task: int | None = None
    show_all: bool = False


@dataclass(frozen=True, slots=True)
class TaskSlice:
    tasks: list[TaskRecord]  # the page's, in order
    bad: list[TaskRecord]
    page: int
    pages: int
    total: int  # good tasks that match the filter
    sort: str


Row = TaskRecord | TaskLight
T = TypeVar("T", TaskRecord, TaskLight)


def worker_long_name(task: Row) -> str:
    """The name the table shows: `user-Ncores-key1-key2`, `*` when modified."""
    if isinstance(task, TaskLight):  # no worker_info: its stored short name
        return long_from_short(task.worker_name, task.unique_key, task.modified)
    info = task.worker_info
    concurrency, modified = int(info.get("concurrency", 0)), bool(info.get("modified"))
    return long_worker_name(task.username, concurrency, task.unique_key, modified)


def _games(task: Row) -> int:
    if isinstance(task, TaskLight):
        return task.games
    return task.wins + task.losses + task.draws


class _OnAMachine(Protocol):
    @property
    def worker_name(self) -> str: ...


NO_RESIDUAL = -1.0  # a machine the χ² left out (too few games): first


def _by_residual(residual: Mapping[str, float]) -> Callable[[_OnAMachine], float]:
    """The residual order's key: the task's machine's χ² residual."""
    return lambda task: residual.get(task.worker_name, NO_RESIDUAL)


def _key(sort: str, residual: Mapping[str, float]) -> Callable[[Row], Any]:
    keys: dict[str, Callable[[Row], Any]] = {
        "task": lambda task: task.task_id,
        # By machine: short name, then key (the database's order too).
        "worker": lambda task: (task.worker_name.lower(), task.unique_key),
        "games": _games,
        "updated": lambda task: task.last_updated,
        "crashes": lambda task: (task.crashes, task.time_losses),
        "residual": _by_residual(residual),
    }
    return keys[sort]


def _ordered(tasks: Sequence[T], query: TaskQuery, residual: Mapping[str, float]) -> list[T]:
    """Filtered by worker name and sorted; `tasks` come in task order, so ties
    stay in task order either way (the sort is stable)."""
    chosen = list(tasks)
    if query.worker:
        wanted = query.worker.casefold()
        chosen = [task for task in chosen if wanted in worker_long_name(task).casefold()]
    chosen.sort(key=_key(_sort(query), residual), reverse=query.descending)
    return chosen


def _sort(query: TaskQuery) -> str:
    return query.sort if query.sort in SORTS else "task"


@dataclass(frozen=True, slots=True)
class _Window:
    page: int
    pages: int
    start: int
    size: int


def _window(total: int, query: TaskQuery, shown_at: int | None = None) -> _Window:
    """The page to show: the one asked for, or the one holding `show_task`."""
    size = max(total, 1) if query.show_all else TASKS_PER_PAGE
    pages = max(1, -(-total // size))
    page = query.page if shown_at is None else shown_at // size + 1
    page = min(max(page, 1), pages)
    return _Window(page, pages, (page - 1) * size, size)


def _position(ordered: Sequence[Row], task_id: int | None) -> int | None:
    if task_id is None:
        return None
    return next((i for i, task in enumerate(ordered) if task.task_id == task_id), None)


def from_memory(
    tasks: Sequence[TaskRecord], query: TaskQuery, residual: Mapping[str, float]
) -> TaskSlice:
    """A live run's page, from its tasks in memory (in task order)."""
    ordered = _ordered([task for task in tasks if not task.bad], query, residual)
    window = _window(len(ordered), query, _position(ordered, query.show_task))
    shown = ordered[window.start : window.start + window.size]
    bad = [task for task in tasks if task.bad]
    return TaskSlice(shown, bad, window.page, window.pages, len(ordered), _sort(query))


def from_storage(tx: Tx, run_id: str, query: TaskQuery, residual: Mapping[str, float]) -> TaskSlice:
    """A stored run's page: sorted and paged by the database when it can, else
    ordered over light rows with only the page's records read."""
    sort = _sort(query)
    bad = tx.tasks.bad_of_run(run_id)
    order = SQL_ORDERS.get(sort)
    if not query.worker and query.show_task is None:
        total = tx.tasks.count_of_run(run_id)
        window = _window(total, query)
        span = (query.descending, window.start, window.size)
        if order is not None:
            shown = tx.tasks.page_of_run(run_id, order, *span)
        else:  # the residual order
            shown = tx.tasks.page_by_machine_value(run_id, residual, NO_RESIDUAL, span)
        return TaskSlice(shown, bad, window.page, window.pages, total, sort)
    ordered = _ordered_ids(tx, run_id, query, residual)
    shown_at = ordered.index(query.show_task) if query.show_task in ordered else None
    window = _window(len(ordered), query, shown_at)
    ids = ordered[window.start : window.start + window.size]
    shown = tx.tasks.of_run_by_ids(run_id, ids)
    return TaskSlice(shown, bad, window.page, window.pages, len(ordered), sort)


def _ordered_ids(tx: Tx, run_id: str, query: TaskQuery, residual: Mapping[str, float]) -> list[int]:
    """The stored run's task ids in the table's order (a filter, or the page
    holding one task). The residual order alone needs only each task's
    machine, a quarter of a light row's cost."""
    if _sort(query) == "residual" and not query.worker:
        machines = tx.tasks.workers_of_run(run_id)
        machines.sort(key=_by_residual(residual), reverse=query.descending)
        return [task.task_id for task in machines]
    # A filter without `*` matches the long name with or without the star alike.
    lights = tx.tasks.light_of_run(run_id, modified="*" in query.worker)
    return [task.task_id for task in _ordered(lights, query, residual)]
