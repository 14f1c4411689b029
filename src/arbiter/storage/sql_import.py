"""Bulk writes of `arbiter import fishtest`: many rows a statement, and a row
whose key is already stored is left as it is, so importing the same documents
twice writes them once."""

from typing import Any

from sqlalchemy import Connection, func, select

from arbiter.storage import run_search
from arbiter.storage.records import NetRecord, RunRecord, TaskRecord, column_names
from arbiter.storage.schema import actions, nets, pgns, runs, tasks, users
from arbiter.storage.sql_common import insert_missing


def _rows(records: list[Any]) -> list[dict[str, Any]]:
    if not records:
        return []
    names = column_names(type(records[0]))
    return [{name: getattr(record, name) for name in names} for record in records]


class SqlImportStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add_runs(self, records: list[RunRecord]) -> None:
        """Runs, and their words for the text search, in the order given."""
        insert_missing(self._connection, runs, _rows(records))
        run_search.add(self._connection, [(r.id, r.username, r.args) for r in records])

    def add_tasks(self, records: list[TaskRecord]) -> None:
        insert_missing(self._connection, tasks, _rows(records))

    def add_nets(self, records: list[NetRecord]) -> None:
        insert_missing(self._connection, nets, _rows(records))

    def taken_usernames(self, keys: list[str]) -> dict[str, str]:
        """Of these case-folded names, those an account holds: key -> its name."""
        query = select(users.c.username_key, users.c.username)
        rows = self._connection.execute(query.where(users.c.username_key.in_(keys)))
        return {row.username_key: row.username for row in rows}

    def add_users(self, rows: list[dict[str, Any]]) -> None:
        """Rows of every column but `id`; a name taken in any case keeps its account."""
        insert_missing(self._connection, users, rows)

    def add_actions(self, rows: list[dict[str, Any]]) -> None:
        """Rows of every column but `id`, in order (ids follow it); an action whose
        `fishtest_id` is stored already is left out."""
        insert_missing(self._connection, actions, rows)

    def add_pgns(self, rows: list[dict[str, Any]]) -> None:
        insert_missing(self._connection, pgns, rows)

    def counts(self) -> dict[str, int]:
        """Rows of the tables that make an instance not empty."""
        return {
            table.name: int(
                self._connection.execute(select(func.count()).select_from(table)).scalar_one()
            )
            for table in (users, runs, actions)
        }
