"""The audit log on SQL: append, whitelisted queries (newest first) and searches."""

from dataclasses import fields

from sqlalchemy import Connection, func, insert, select

from arbiter.storage.action_search import ActionSearch, has_checks, run_search, to_sql
from arbiter.storage.base import ActionFilter, NewAction
from arbiter.storage.records import ActionRecord
from arbiter.storage.schema import actions


class SqlActionStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, entry: NewAction) -> int:
        values = {field.name: getattr(entry, field.name) for field in fields(NewAction)}
        statement = insert(actions).values(values).returning(actions.c.id)
        action_id: int = self._connection.execute(statement).scalar_one()
        return action_id

    def query(self, action_filter: ActionFilter) -> list[ActionRecord]:
        query = select(actions)
        if action_filter.action is not None:
            query = query.where(actions.c.action == action_filter.action)
        if action_filter.username is not None:
            query = query.where(actions.c.username == action_filter.username)
        if action_filter.run_id is not None:
            query = query.where(actions.c.run_id == action_filter.run_id)
        if action_filter.before is not None:
            query = query.where(actions.c.time < action_filter.before)
        # id breaks ties between actions recorded within the same clock tick.
        query = query.order_by(actions.c.time.desc(), actions.c.id.desc())
        query = query.limit(action_filter.limit)
        return [ActionRecord(**row._mapping) for row in self._connection.execute(query)]

    def search(self, search: ActionSearch) -> list[ActionRecord]:
        return run_search(self._connection, search)

    def worker_run_counts(self, action: str, since: float) -> dict[tuple[str, str], int]:
        query = (
            select(actions.c.worker, actions.c.run_id, func.count())
            .where(actions.c.action == action, actions.c.time >= since)
            .group_by(actions.c.worker, actions.c.run_id)
        )
        return {
            (str(worker), str(run_id)): int(count)
            for worker, run_id, count in self._connection.execute(query)
            if worker and run_id
        }

    def count(self, search: ActionSearch, cap: int) -> int:
        if has_checks(search.where):
            raise ValueError("a search with checks cannot be counted in SQL")
        condition = to_sql(search.where, self._connection.dialect.name)
        matching = select(actions.c.id).where(condition).limit(cap + 1).subquery()
        counted = select(func.count()).select_from(matching)
        found: int = self._connection.execute(counted).scalar_one()
        return found
