"""One run's tasks as its page reads them: a page in the table's order, the
workers' totals for the χ² summary, the few purged ones, and light rows for
what SQL cannot order by (a worker filter, the residual order).

A finished run of thousands of tasks is thus shown without building a record
for each of them: the database sorts, pages and sums, and only the page's
rows are decoded.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Integer,
    Row,
    Select,
    bindparam,
    cast,
    false,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB

from arbiter.storage import prepared
from arbiter.storage.base import MachineRunTotals, TaskLight, TaskOrder, TaskWorker, WorkerTotals
from arbiter.storage.schema import runs, tasks


def _good(run_id: str | BindParameter[str]) -> ColumnElement[bool]:
    """The run's good (not purged) tasks; `run_id` a value, or a parameter of a
    statement kept for `prepared.fetch_all`."""
    return (tasks.c.run_id == run_id) & tasks.c.bad.is_(False)


def _order_by(order: TaskOrder, descending: bool, dialect: str) -> list[ColumnElement[Any]]:
    """The table's order in SQL; ties keep task order whichever way it goes.
    Names compare by code point, as Python's sort does (PostgreSQL's "C")."""

    def text(column: ColumnElement[str]) -> ColumnElement[str]:
        return column.collate("C") if dialect == "postgresql" else column

    keys: dict[TaskOrder, list[ColumnElement[Any]]] = {
        "task": [tasks.c.task_id],
        # By machine: its short name, then its key (whose second group the long
        # name shown adds). Nothing is read from the worker_info documents.
        "worker": [text(func.lower(tasks.c.worker_name)), text(tasks.c.unique_key)],
        "games": [tasks.c.wins + tasks.c.losses + tasks.c.draws],
        "updated": [tasks.c.last_updated],
        "crashes": [tasks.c.crashes, tasks.c.time_losses],
    }
    chosen = [key.desc() if descending else key.asc() for key in keys[order]]
    return [*chosen, tasks.c.task_id.asc()]


def page(
    connection: Connection,
    run_id: str,
    *,
    order: TaskOrder,
    descending: bool,
    offset: int,
    limit: int,
) -> list[Row[Any]]:
    # The ids are sorted alone, then the page's rows read: sorting whole rows
    # would carry every task's worker_info through the sort.
    query = (
        select(tasks.c.task_id)
        .where(_good(run_id))
        .order_by(*_order_by(order, descending, connection.dialect.name))
        .offset(offset)
        .limit(limit)
    )
    return by_ids(connection, run_id, list(connection.execute(query).scalars()))


def page_by_value(
    connection: Connection,
    run_id: str,
    values: Mapping[str, float],
    missing: float,
    span: tuple[bool, int, int],
) -> list[Row[Any]]:
    """A page of the run's good tasks by their machine's value, ties by task
    id; `span` is (descending, offset, limit). PostgreSQL joins the machines'
    ranks (one JSON parameter: a value may be infinite) and sorts: thousands of
    rows would cost this process more to receive than the page. SQLite sorts
    the driver's rows here, where its own sort would spend more of this
    process than Python does."""
    descending, offset, limit = span
    if connection.dialect.name == "postgresql":
        ranks, missing_rank = dense_ranks(values, missing)
        ranked = (
            func.jsonb_each_text(cast(bindparam("ranks", json.dumps(ranks)), JSONB))
            .table_valued("key", "value")
            .alias("ranked")
        )
        rank = func.coalesce(cast(ranked.c.value, Integer), missing_rank)
        query = (
            select(tasks.c.task_id)
            .select_from(tasks.outerjoin(ranked, ranked.c.key == tasks.c.worker_name))
            .where(_good(run_id))
            .order_by(rank.desc() if descending else rank.asc(), tasks.c.task_id.asc())
            .offset(offset)
            .limit(limit)
        )
        task_ids = list(connection.execute(query).scalars())
    else:
        rows = prepared.fetch_all(connection, _WORKERS, {"run_id": run_id})  # in task order
        value_of = values.get
        rows.sort(key=lambda row: value_of(row[1], missing), reverse=descending)  # stable
        task_ids = [task_id for task_id, _ in rows[offset : offset + limit]]
    return by_ids(connection, run_id, task_ids)


def dense_ranks(values: Mapping[str, float], missing: float) -> tuple[dict[str, int], int]:
    """Each name's rank by value, equal values sharing one (so their tasks stay
    in task order), and the rank `missing` would have."""
    order = {value: rank for rank, value in enumerate(sorted({*values.values(), missing}))}
    return {name: order[value] for name, value in values.items()}, order[missing]


def count(connection: Connection, run_id: str) -> int:
    query = select(func.count()).select_from(tasks).where(_good(run_id))
    return int(connection.execute(query).scalar_one())


def by_ids(connection: Connection, run_id: str, task_ids: Sequence[int]) -> list[Row[Any]]:
    """These tasks of the run, in the order given."""
    if not task_ids:
        return []
    query = select(tasks).where(tasks.c.run_id == run_id, tasks.c.task_id.in_(task_ids))
    found = {row.task_id: row for row in connection.execute(query)}
    return [found[task_id] for task_id in task_ids if task_id in found]


def bad(connection: Connection, run_id: str) -> list[Row[Any]]:
    query = (
        select(tasks)
        .where(tasks.c.run_id == run_id, tasks.c.bad.is_(True))
        .order_by(tasks.c.task_id)
    )
    return list(connection.execute(query))


def _light_rows(modified: bool) -> Select[Any]:
    flag = tasks.c.worker_info["modified"].as_boolean() if modified else false().label("modified")
    return (
        select(
            tasks.c.task_id,
            tasks.c.unique_key,
            tasks.c.worker_name,
            flag,
            tasks.c.wins + tasks.c.losses + tasks.c.draws,
            tasks.c.last_updated,
            tasks.c.crashes,
            tasks.c.time_losses,
        )
        .where(_good(bindparam("run_id")))
        .order_by(tasks.c.task_id)
    )


# Statements kept, each compiled once by prepared.fetch_all.
_LIGHT = {modified: _light_rows(modified) for modified in (False, True)}


def light(connection: Connection, run_id: str, *, modified: bool) -> list[TaskLight]:
    """Every good task of the run in task order, with what orders and filters it,
    read by the driver. Whether each machine was modified is read only when
    asked for: it is in the worker_info document, which the database must parse
    for every row."""
    rows = prepared.fetch_all(connection, _LIGHT[modified], {"run_id": run_id})
    return [
        TaskLight(
            task_id=task_id,
            unique_key=unique_key,
            worker_name=worker_name,
            modified=bool(was_modified),
            games=int(games),
            last_updated=float(last_updated),
            crashes=int(crashes),
            time_losses=int(time_losses),
        )
        for (task_id, unique_key, worker_name, was_modified, games, last_updated, crashes,
             time_losses) in rows
    ]  # fmt: skip


_WORKERS = (
    select(tasks.c.task_id, tasks.c.worker_name)
    .where(_good(bindparam("run_id")))
    .order_by(tasks.c.task_id)
)


def workers(connection: Connection, run_id: str) -> list[TaskWorker]:
    """Every good task's id and machine: thousands of rows, read by the driver."""
    rows = prepared.fetch_all(connection, _WORKERS, {"run_id": run_id})
    return [TaskWorker(task_id, worker_name) for task_id, worker_name in rows]


def worker_totals(connection: Connection, run_id: str) -> WorkerTotals:
    """Per worker (short name), the good tasks' game pairs as the χ² reads them:
    [WW+WD, LL+LD, DD+WL]; workers with none left out."""
    pair = [func.sum(tasks.c.pentanomial[index].as_integer()) for index in range(5)]
    query = select(tasks.c.worker_name, *pair).where(_good(run_id)).group_by(tasks.c.worker_name)
    totals: WorkerTotals = {}
    for worker, ll, ld, dd, wd, ww in connection.execute(query):
        row = (float((ww or 0) + (wd or 0)), float((ll or 0) + (ld or 0)), float(dd or 0))
        if any(row):
            totals[worker] = row
    return totals


def runs_with_tasks(connection: Connection, at_least: int) -> list[str]:
    query = select(tasks.c.run_id).group_by(tasks.c.run_id).having(func.count() >= at_least)
    return list(connection.scalars(query))


def machine_run_totals(connection: Connection, run_ids: Sequence[str]) -> list[MachineRunTotals]:
    """Per (machine, run), every task summed, with the run's author: the health
    record (domain/health.py)."""
    return _machine_runs(connection, _machine_query(tasks.c.run_id.in_(list(run_ids))))


def machine_history(connection: Connection, worker_name: str, limit: int) -> list[MachineRunTotals]:
    """One machine's runs (through the worker_name index), newest task first."""
    query = _machine_query(tasks.c.worker_name == worker_name)
    newest_first = query.order_by(func.max(tasks.c.last_updated).desc()).limit(limit)
    return _machine_runs(connection, newest_first)


def _machine_query(where: ColumnElement[bool]) -> Select[Any]:
    pair = [func.sum(tasks.c.pentanomial[index].as_integer()) for index in range(5)]
    return (
        select(
            tasks.c.worker_name,
            tasks.c.run_id,
            runs.c.username,
            func.count(),
            func.sum(tasks.c.wins + tasks.c.losses + tasks.c.draws),
            func.sum(tasks.c.crashes),
            func.sum(tasks.c.time_losses),
            func.max(tasks.c.last_updated),
            func.avg(tasks.c.worker_info["nps"].as_float()),
            func.avg(tasks.c.worker_info["game_nps"].as_float()),
            *pair,
        )
        .join(runs, runs.c.id == tasks.c.run_id)
        .where(where)
        .group_by(tasks.c.worker_name, tasks.c.run_id, runs.c.username)
    )


def _machine_runs(connection: Connection, query: Select[Any]) -> list[MachineRunTotals]:
    found = []
    for row in connection.execute(query):
        name, run_id, author, count, games, crashes, time_losses, last, nps, game_nps, *penta = row
        ll, ld, dd, wd, ww = (int(value or 0) for value in penta)
        found.append(
            MachineRunTotals(
                name,
                run_id,
                author,
                int(count),
                int(games or 0),
                int(crashes or 0),
                int(time_losses or 0),
                (ll, ld, dd, wd, ww),
                float(last or 0.0),
                float(nps or 0.0),
                float(game_nps or 0.0),
            )
        )
    return found
