"""Runs and tasks on SQL. Rows map one to one onto `RunRecord` / `TaskRecord`."""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Row,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
    update,
)

from arbiter.storage import run_search, sql_finished, sql_run_tasks
from arbiter.storage.base import (
    DAY_SECONDS,
    FinishedRunFilter,
    FinishedSlice,
    MachineRunTotals,
    RunCost,
    TaskContribution,
    TaskLight,
    TaskOrder,
    TaskWorker,
    WorkerTotals,
)
from arbiter.storage.prepared import execute_many
from arbiter.storage.records import RunRecord, TaskRecord, column_names
from arbiter.storage.schema import runs, tasks

STREAM_ROWS = 10_000  # rows fetched at a time by the full scans of a rebuild


def utc_day(connection: Connection, seconds: ColumnElement[float]) -> ColumnElement[int]:
    """`day_of` in SQL: SQLite's CAST truncates (times are positive),
    PostgreSQL's rounds, so it takes the floor first."""
    if connection.dialect.name == "postgresql":
        return cast(func.floor(seconds / DAY_SECONDS), Integer)
    return cast(seconds / DAY_SECONDS, Integer)


_RUN_COLUMNS = column_names(RunRecord)
_TASK_COLUMNS = column_names(TaskRecord)


def _values(record: RunRecord | TaskRecord) -> dict[str, Any]:
    """The record's columns, shallow: `asdict` would deep-copy the run's args (its
    SPRT state and results history) on every result update, only to encode them."""
    names = _RUN_COLUMNS if isinstance(record, RunRecord) else _TASK_COLUMNS
    return {name: getattr(record, name) for name in names}


def _changed_values(
    record: RunRecord | TaskRecord, stored: RunRecord | TaskRecord
) -> dict[str, Any]:
    """The columns whose value is not the very object the stored row was made from.

    Records are immutable values (nothing changes a run's args in place), so a
    field holding the same object holds the same value: a result update leaves
    the run's args and the task's worker_info unencoded and unsent."""
    names = _RUN_COLUMNS if isinstance(record, RunRecord) else _TASK_COLUMNS
    return {
        name: value
        for name in names
        if (value := getattr(record, name)) is not getattr(stored, name)
    }


def _update_groups(
    pairs: Sequence[tuple[RunRecord | TaskRecord, RunRecord | TaskRecord | None]],
    keys: tuple[str, ...],
) -> list[list[dict[str, Any]]]:
    """The changed values of each (record, stored) pair, its `keys` bound as
    `key_<name>`, grouped by the columns they set: a group is one executemany
    (a batch of result updates changes the same columns of every task)."""
    groups: dict[frozenset[str], list[dict[str, Any]]] = {}
    for record, stored in pairs:
        values = _values(record) if stored is None else _changed_values(record, stored)
        for key in keys:
            values.pop(key, None)
        if values:
            values.update({f"key_{key}": getattr(record, key) for key in keys})
            groups.setdefault(frozenset(values), []).append(values)
    return list(groups.values())


# The hot writes (every result update and assignment) as constant statements: the
# columns to set come from the parameters, each set compiled once (storage/prepared.py).
_INSERT_RUN = insert(runs)
_UPDATE_RUN = update(runs).where(runs.c.id == bindparam("key_id"))
_INSERT_TASK = insert(tasks)
_UPDATE_TASK = update(tasks).where(
    tasks.c.run_id == bindparam("key_run_id"), tasks.c.task_id == bindparam("key_task_id")
)


def _described_anew(run: RunRecord, stored: RunRecord) -> bool:
    """Whether a save changes the run's description (its other words never change).
    A result update keeps the very args object, or copies it with the same `info`."""
    if run.args is stored.args:
        return False
    new, old = run.args.info, stored.args.info
    return new is not old and new != old


def _run(row: Row[Any]) -> RunRecord:
    return RunRecord(**_with_pentanomial_tuple(row))


def _task(row: Row[Any]) -> TaskRecord:
    return TaskRecord(**_with_pentanomial_tuple(row))


def _with_pentanomial_tuple(row: Row[Any]) -> dict[str, Any]:
    """The row's columns; its pentanomial, a JSON array, as the records' tuple."""
    values = dict(row._mapping)
    values.pop("cursor_seq", None)  # a text search's sort key (sql_finished.py)
    values["pentanomial"] = tuple(values["pentanomial"])
    return values


class SqlRunStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def updated_since(self, since: float, limit: int) -> list[str]:
        # Live runs and finished ones, each through its (finished, last_updated) index.
        found: list[tuple[float, str]] = []
        for finished in (False, True):
            query = (
                select(runs.c.last_updated, runs.c.id)
                .where(
                    runs.c.finished.is_(finished),
                    runs.c.deleted.is_(False),
                    runs.c.last_updated >= since,
                )
                .order_by(runs.c.last_updated.desc())
                .limit(limit)
            )
            found.extend((float(at), str(run_id)) for at, run_id in self._connection.execute(query))
        return [run_id for _, run_id in sorted(found, reverse=True)[:limit]]

    def add(self, run: RunRecord) -> None:
        self._connection.execute(_INSERT_RUN, _values(run))
        run_search.add(self._connection, [(run.id, run.username, run.args)])

    def get(self, run_id: str) -> RunRecord | None:
        row = self._connection.execute(select(runs).where(runs.c.id == run_id)).one_or_none()
        return None if row is None else _run(row)

    def save(self, run: RunRecord, stored: RunRecord | None = None) -> None:
        self.save_many([(run, stored)])

    def save_many(self, runs: list[tuple[RunRecord, RunRecord | None]]) -> None:
        for rows in _update_groups(runs, ("id",)):
            execute_many(self._connection, _UPDATE_RUN, rows)
        for run, stored in runs:
            if stored is not None and _described_anew(run, stored):
                run_search.replace(self._connection, run.id, run.username, run.args)

    def unfinished(self) -> list[RunRecord]:
        query = select(runs).where(runs.c.finished.is_(False)).order_by(runs.c.start_time)
        return [_run(row) for row in self._connection.execute(query)]

    def get_many(self, run_ids: list[str]) -> list[RunRecord]:
        if not run_ids:
            return []
        query = select(runs).where(runs.c.id.in_(run_ids)).order_by(runs.c.id)
        return [_run(row) for row in self._connection.execute(query)]

    def finished(self, run_filter: FinishedRunFilter) -> list[RunRecord]:
        listing = sql_finished.listing(self._connection, run_filter)
        query = sql_finished.ordered(listing).offset(run_filter.offset).limit(run_filter.limit)
        return [_run(row) for row in self._connection.execute(query)]

    def finished_slice(self, run_filter: FinishedRunFilter, count_up_to: int = 0) -> FinishedSlice:
        listing = sql_finished.listing(self._connection, run_filter)
        back = bool(run_filter.after)
        cursor = run_filter.after or run_filter.before
        if count_up_to and listing.searching and not cursor:
            return self._first_search_page(listing, run_filter.limit, count_up_to)
        query = sql_finished.beyond(listing, cursor, older=not back) if cursor else listing.query
        listed = replace(listing, query=query)
        page = sql_finished.ordered(listed, newest_first=not back).limit(run_filter.limit + 1)
        rows = list(self._connection.execute(page))
        more = len(rows) > run_filter.limit
        rows = rows[: run_filter.limit]
        if back:
            rows.reverse()
        if not rows:
            return FinishedSlice([], None, None)
        newer = listing.cursor(rows[0]) if (more if back else bool(cursor)) else None
        older = listing.cursor(rows[-1]) if (back or more) else None
        return FinishedSlice([_run(row) for row in rows], newer, older)

    def _first_search_page(
        self, listing: sql_finished.Listing, limit: int, count_up_to: int
    ) -> FinishedSlice:
        """A search's first page and its count from one reading of the text
        index (the costly part of a search: merging each word's postings):
        the matches' ids in order up to the bound, then the page's rows."""
        seq = listing.keys[0].label("cursor_seq")
        ids = sql_finished.ordered(listing).with_only_columns(runs.c.id, seq)
        found: list[Row[Any]] = list(
            self._connection.execute(ids.limit(max(count_up_to, limit + 1)))
        )
        shown = [row.id for row in found[:limit]]
        rows = self._connection.execute(select(runs).where(runs.c.id.in_(shown)))
        by_id = {row.id: _run(row) for row in rows}
        older = listing.cursor(found[limit - 1]) if len(found) > limit else None
        page = [by_id[run_id] for run_id in shown if run_id in by_id]
        return FinishedSlice(page, None, older, counted=min(len(found), count_up_to))

    def count_finished(self, run_filter: FinishedRunFilter, at_most: int) -> int:
        listing = sql_finished.listing(self._connection, run_filter)
        # A search on SQLite counts in its order: the plan that walks the text
        # index is the one that stops at the bound (PostgreSQL reads its text
        # index whole either way). The tabs count from their indexes alone.
        in_order = listing.searching and self._connection.dialect.name == "sqlite"
        rows = sql_finished.ordered(listing) if in_order else listing.query
        counted = rows.with_only_columns(runs.c.id).limit(at_most).subquery()
        query = select(func.count()).select_from(counted)
        return int(self._connection.execute(query).scalar_one())

    def costs(self) -> Iterator[RunCost]:
        query = select(
            runs.c.id,
            runs.c.username,
            runs.c.start_time,
            runs.c.finished,
            runs.c.deleted,
            runs.c.args["tc"].as_string(),
            runs.c.args["threads"].as_integer(),
        )
        for row in self._connection.execute(query.execution_options(yield_per=STREAM_ROWS)):
            run_id, username, start, finished, deleted, tc, threads = row
            yield RunCost(
                run_id, username, start, bool(finished), bool(deleted), tc or "", int(threads or 1)
            )


class SqlTaskStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, task: TaskRecord) -> None:
        self.add_many([task])

    def add_many(self, tasks: list[TaskRecord]) -> None:
        execute_many(self._connection, _INSERT_TASK, [_values(task) for task in tasks])

    def get(self, run_id: str, task_id: int) -> TaskRecord | None:
        query = select(tasks).where(tasks.c.run_id == run_id, tasks.c.task_id == task_id)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else _task(row)

    def save(self, task: TaskRecord, stored: TaskRecord | None = None) -> None:
        self.save_many([(task, stored)])

    def save_many(self, tasks: list[tuple[TaskRecord, TaskRecord | None]]) -> None:
        for rows in _update_groups(tasks, ("run_id", "task_id")):
            execute_many(self._connection, _UPDATE_TASK, rows)

    def for_run(self, run_id: str) -> list[TaskRecord]:
        query = select(tasks).where(tasks.c.run_id == run_id).order_by(tasks.c.task_id)
        return [_task(row) for row in self._connection.execute(query)]

    def for_runs(self, run_ids: list[str]) -> list[TaskRecord]:
        if not run_ids:
            return []
        query = (
            select(tasks)
            .where(tasks.c.run_id.in_(run_ids))
            .order_by(tasks.c.run_id, tasks.c.task_id)
        )
        return [_task(row) for row in self._connection.execute(query)]

    def deactivate_all(self, run_id: str, at: float) -> int:
        statement = (
            update(tasks)
            .where(tasks.c.run_id == run_id, tasks.c.active.is_(True))
            .values(active=False, last_updated=at, spsa_params=None)
        )
        return self._connection.execute(statement).rowcount

    def contributions(self) -> Iterator[TaskContribution]:
        played = func.sum(tasks.c.wins + tasks.c.losses + tasks.c.draws)
        day = utc_day(self._connection, tasks.c.last_updated)
        query = select(
            tasks.c.username, tasks.c.run_id, day, played, func.max(tasks.c.last_updated)
        ).group_by(tasks.c.username, tasks.c.run_id, day)
        for row in self._connection.execute(query.execution_options(yield_per=STREAM_ROWS)):
            username, run_id, on_day, games, last = row
            yield TaskContribution(username, run_id, int(on_day), int(games or 0), float(last))

    def active(self) -> list[TaskRecord]:
        query = (
            select(tasks).where(tasks.c.active.is_(True)).order_by(tasks.c.run_id, tasks.c.task_id)
        )
        return [_task(row) for row in self._connection.execute(query)]

    def machine_run_totals(self, run_ids: Sequence[str]) -> list[MachineRunTotals]:
        return sql_run_tasks.machine_run_totals(self._connection, run_ids)

    def machine_history(self, worker_name: str, limit: int) -> list[MachineRunTotals]:
        return sql_run_tasks.machine_history(self._connection, worker_name, limit)

    def machine_seen(self, worker_names: Sequence[str]) -> bool:
        query = select(tasks.c.task_id).where(tasks.c.worker_name.in_(worker_names)).limit(1)
        return self._connection.execute(query).first() is not None

    def delete_for_run(self, run_id: str) -> None:
        self._connection.execute(delete(tasks).where(tasks.c.run_id == run_id))

    def page_of_run(
        self, run_id: str, order: TaskOrder, descending: bool, offset: int, limit: int
    ) -> list[TaskRecord]:
        rows = sql_run_tasks.page(
            self._connection, run_id, order=order, descending=descending, offset=offset, limit=limit
        )
        return [_task(row) for row in rows]

    def count_of_run(self, run_id: str) -> int:
        return sql_run_tasks.count(self._connection, run_id)

    def light_of_run(self, run_id: str, *, modified: bool = False) -> list[TaskLight]:
        return sql_run_tasks.light(self._connection, run_id, modified=modified)

    def of_run_by_ids(self, run_id: str, task_ids: list[int]) -> list[TaskRecord]:
        return [_task(row) for row in sql_run_tasks.by_ids(self._connection, run_id, task_ids)]

    def bad_of_run(self, run_id: str) -> list[TaskRecord]:
        return [_task(row) for row in sql_run_tasks.bad(self._connection, run_id)]

    def workers_of_run(self, run_id: str) -> list[TaskWorker]:
        return sql_run_tasks.workers(self._connection, run_id)

    def page_by_machine_value(
        self,
        run_id: str,
        values: Mapping[str, float],
        missing: float,
        span: tuple[bool, int, int],
    ) -> list[TaskRecord]:
        rows = sql_run_tasks.page_by_value(self._connection, run_id, values, missing, span)
        return [_task(row) for row in rows]

    def worker_totals(self, run_id: str) -> WorkerTotals:
        return sql_run_tasks.worker_totals(self._connection, run_id)

    def runs_with_tasks(self, at_least: int) -> list[str]:
        return sql_run_tasks.runs_with_tasks(self._connection, at_least)
