"""Contributor totals on SQL: one upsert statement per table for a batch of changes."""

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, case, delete, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from arbiter.storage.base import Contribution
from arbiter.storage.schema import contributor_days, contributor_totals

_SUMMED = ("games", "cpu_seconds", "tests")
UPSERT_ROWS = 10_000


class SqlContributionStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, changes: Iterable[Contribution]) -> None:
        by_user: dict[str, list[Any]] = {}
        by_day: dict[tuple[str, int], list[Any]] = {}
        for change in changes:
            _fold(by_user, change.username, change)
            _fold(by_day, (change.username, change.day), change)
        users = ({"username": key, **_values(sums)} for key, sums in by_user.items())
        self._upsert(contributor_totals, ("username",), users)
        days = ({"username": k[0], "day": k[1], **_values(sums)} for k, sums in by_day.items())
        self._upsert(contributor_days, ("username", "day"), days)

    def _upsert(self, table: Table, keys: tuple[str, ...], rows: Iterator[dict[str, Any]]) -> None:
        """Add the rows' sums to the stored ones, UPSERT_ROWS rows a statement (a
        rebuild writes millions: their dicts are made a batch at a time)."""
        dialect = postgresql if self._connection.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(table)
        new = statement.excluded
        values = {name: table.c[name] + new[name] for name in _SUMMED}
        values["last_active"] = case(
            (new.last_active > table.c.last_active, new.last_active),
            else_=table.c.last_active,
        )
        statement = statement.on_conflict_do_update(index_elements=list(keys), set_=values)
        while batch := list(itertools.islice(rows, UPSERT_ROWS)):
            self._connection.execute(statement, batch)

    def all_time(self) -> list[Contribution]:
        totals = contributor_totals.c
        query = select(contributor_totals).where(_some(totals)).order_by(totals.username)
        return [_contribution(row._mapping) for row in self._connection.execute(query)]

    def of_user(self, username: str) -> Contribution | None:
        query = select(contributor_totals).where(contributor_totals.c.username == username)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else _contribution(row._mapping)

    def since(self, day: int) -> list[Contribution]:
        days = contributor_days.c
        # Grouped by an expression, not the column: grouped by the column, SQLite
        # walks the (username, day) key over every day of the history instead of
        # reading the last days through the day index.
        name = (days.username + "").label("username")
        query = (
            select(
                name,
                func.sum(days.games).label("games"),
                func.sum(days.cpu_seconds).label("cpu_seconds"),
                func.sum(days.tests).label("tests"),
                func.max(days.last_active).label("last_active"),
            )
            .where(days.day >= day, _some(days))
            .group_by(name)
            .order_by(name)
        )
        return [_contribution(row._mapping) for row in self._connection.execute(query)]

    def tests(self) -> int:
        total = select(func.coalesce(func.sum(contributor_totals.c.tests), 0))
        return int(self._connection.execute(total).scalar_one())

    def clear(self) -> None:
        self._connection.execute(delete(contributor_days))
        self._connection.execute(delete(contributor_totals))


def _some(columns: Any) -> ColumnElement[bool]:
    """Rows with something to show: a re-opened or deleted run leaves zeros."""
    return or_(columns.games != 0, columns.tests != 0)


def _fold(sums: dict[Any, list[Any]], key: Any, change: Contribution) -> None:
    """Sum `change` into the sums of `key`: [games, cpu_seconds, tests, last_active]
    (one row per key in one statement: ON CONFLICT may not touch a row twice in
    one INSERT on PostgreSQL)."""
    held = sums.get(key)
    if held is None:
        sums[key] = [change.games, change.cpu_seconds, change.tests, change.last_active]
        return
    held[0] += change.games
    held[1] += change.cpu_seconds
    held[2] += change.tests
    held[3] = max(held[3], change.last_active)


def _values(sums: list[Any]) -> dict[str, Any]:
    games, cpu_seconds, tests, last_active = sums
    return {"games": games, "cpu_seconds": cpu_seconds, "tests": tests, "last_active": last_active}


def _contribution(row: Any) -> Contribution:
    """An all-time row, or a user's sums over days (no single day)."""
    return Contribution(
        username=row["username"],
        games=int(row["games"] or 0),
        cpu_seconds=float(row["cpu_seconds"] or 0.0),
        tests=int(row["tests"] or 0),
        last_active=float(row["last_active"] or 0.0),
    )
