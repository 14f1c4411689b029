"""Runs and tasks on SQL. Rows map one to one onto `RunRecord` / `TaskRecord`."""

from dataclasses import asdict
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, select, update

from arbiter.storage.base import FinishedRunFilter
from arbiter.storage.records import RunRecord, TaskRecord
from arbiter.storage.schema import runs, tasks

LTC_TC_BASE = 40.0  # seconds: a run is "long time control" from 40 s per game on


def _run(row: Row[Any]) -> RunRecord:
    return RunRecord(**row._mapping)


def _task(row: Row[Any]) -> TaskRecord:
    return TaskRecord(**row._mapping)


class SqlRunStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, run: RunRecord) -> None:
        self._connection.execute(insert(runs).values(asdict(run)))

    def get(self, run_id: str) -> RunRecord | None:
        row = self._connection.execute(select(runs).where(runs.c.id == run_id)).one_or_none()
        return None if row is None else _run(row)

    def save(self, run: RunRecord) -> None:
        values = asdict(run)
        del values["id"]
        self._connection.execute(update(runs).where(runs.c.id == run.id).values(values))

    def unfinished(self) -> list[RunRecord]:
        query = select(runs).where(runs.c.finished.is_(False)).order_by(runs.c.start_time)
        return [_run(row) for row in self._connection.execute(query)]

    def get_many(self, run_ids: list[str]) -> list[RunRecord]:
        if not run_ids:
            return []
        query = select(runs).where(runs.c.id.in_(run_ids)).order_by(runs.c.id)
        return [_run(row) for row in self._connection.execute(query)]

    def finished(self, run_filter: FinishedRunFilter) -> list[RunRecord]:
        query = select(runs).where(runs.c.finished.is_(True), runs.c.deleted.is_(False))
        if run_filter.username is not None:
            query = query.where(runs.c.username == run_filter.username)
        if run_filter.success_only:
            query = query.where(runs.c.is_green.is_(True))
        if run_filter.yellow_only:
            query = query.where(runs.c.is_yellow.is_(True))
        if run_filter.ltc_only:
            query = query.where(runs.c.tc_base >= LTC_TC_BASE)
        if run_filter.since is not None:
            query = query.where(runs.c.last_updated >= run_filter.since)
        query = query.order_by(runs.c.last_updated.desc(), runs.c.id.desc())
        query = query.offset(run_filter.offset).limit(run_filter.limit)
        return [_run(row) for row in self._connection.execute(query)]


class SqlTaskStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, task: TaskRecord) -> None:
        self._connection.execute(insert(tasks).values(asdict(task)))

    def get(self, run_id: str, task_id: int) -> TaskRecord | None:
        query = select(tasks).where(tasks.c.run_id == run_id, tasks.c.task_id == task_id)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else _task(row)

    def save(self, task: TaskRecord) -> None:
        values = asdict(task)
        del values["run_id"], values["task_id"]
        key = (tasks.c.run_id == task.run_id) & (tasks.c.task_id == task.task_id)
        self._connection.execute(update(tasks).where(key).values(values))

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

    def games_by_run(self, username: str) -> dict[str, int]:
        played = func.sum(tasks.c.wins + tasks.c.losses + tasks.c.draws)
        query = (
            select(tasks.c.run_id, played)
            .where(tasks.c.username == username)
            .group_by(tasks.c.run_id)
        )
        return {run_id: int(games or 0) for run_id, games in self._connection.execute(query)}

    def delete_for_run(self, run_id: str) -> None:
        self._connection.execute(delete(tasks).where(tasks.c.run_id == run_id))
