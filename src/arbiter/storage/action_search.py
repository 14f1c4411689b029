"""Searching the audit log by conditions on its columns: SQL for what SQL can
decide, a Python check on candidate rows for what it cannot (a regular
expression, whose dialects differ between SQLite and PostgreSQL).

Conditions name columns of `schema.actions`, or `data.<key>` for a text value
inside the `data` document. NULL is a value here, not "unknown": `OneOf`
with `negated` holds for NULL rows unless None is among its values, so the
caller's logic stays two-valued.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    false,
    func,
    not_,
    or_,
    select,
    true,
)

from arbiter.storage import half_time
from arbiter.storage.records import ActionRecord
from arbiter.storage.schema import actions

Scalar = str | int | float
Value = Scalar | None
Operator = Literal["<", "<=", ">", ">="]
DATA_PREFIX = "data."
SCAN_BATCH = 256  # rows fetched at a time for Python checks


@dataclass(frozen=True, slots=True)
class OneOf:
    """The column holds one of `values` (None: NULL); `negated`: any other value."""

    column: str
    values: tuple[Value, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Compare:
    """`column <operator> value`; a NULL never compares. Strings compare by code point."""

    column: str
    operator: Operator
    value: Scalar


@dataclass(frozen=True, slots=True)
class Check:
    """A test SQL cannot make, run on each candidate row."""

    passes: Callable[[ActionRecord], bool]


@dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple["Condition", ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple["Condition", ...]


@dataclass(frozen=True, slots=True)
class Not:
    """Holds where `part` does not (a NULL that `part` never matches included)."""

    part: "Condition"


Condition = OneOf | Compare | Check | AllOf | AnyOf | Not
ALWAYS = AllOf(())
NEVER = AnyOf(())


@dataclass(frozen=True, slots=True)
class ActionSearch:
    """Which actions, how many, in which order (time, then id: insertion order)."""

    where: Condition = ALWAYS
    limit: int = 200
    newest_first: bool = False
    # Bounds the rows a `Check` is run on: a search whose SQL part matches
    # much of the log cannot hold a connection and a thread for long.
    scan_seconds: float = 2.0


class SearchTooLong(Exception):  # noqa: N818 - reads as what happened
    """The Python checks ran out of `scan_seconds` before the search was answered."""


# ---------------------------------------------------------------- SQL


def _column(name: str) -> ColumnElement[Any]:
    if name.startswith(DATA_PREFIX):
        text: ColumnElement[Any] = actions.c.data[name.removeprefix(DATA_PREFIX)].as_string()
        return text
    return actions.c[name]


def _nullable(name: str) -> bool:
    return name.startswith(DATA_PREFIX) or bool(actions.c[name].nullable)


def to_sql(condition: Condition, dialect: str) -> ColumnElement[bool]:
    """The condition with every `Check` taken as true: a superset of the matches."""
    if isinstance(condition, AllOf):
        return and_(true(), *(to_sql(part, dialect) for part in condition.parts))
    if isinstance(condition, AnyOf):
        return or_(false(), *(to_sql(part, dialect) for part in condition.parts))
    if isinstance(condition, Check):
        return true()
    if isinstance(condition, Not):
        return _not_sql(condition, dialect)
    if isinstance(condition, Compare):
        return _compare_sql(condition, dialect)
    return _one_of_sql(condition)


def _not_sql(condition: Not, dialect: str) -> ColumnElement[bool]:
    if has_checks(condition.part):
        return true()  # the negation of a superset is no superset: Python decides
    # A comparison with NULL is unknown, and so is its negation: taken as false
    # first, so that the negation holds for a row the part cannot match.
    return not_(func.coalesce(to_sql(condition.part, dialect), false()))


def _compare_sql(condition: Compare, dialect: str) -> ColumnElement[bool]:
    column = _column(condition.column)
    if isinstance(condition.value, str) and dialect == "postgresql":
        # The database's collation may order "B" before "a"; code points never do.
        column = column.collate("C")
    value = condition.value
    operators: dict[str, Callable[[], ColumnElement[bool]]] = {
        "<": lambda: column < value,
        "<=": lambda: column <= value,
        ">": lambda: column > value,
        ">=": lambda: column >= value,
    }
    return operators[condition.operator]()


def _one_of_sql(condition: OneOf) -> ColumnElement[bool]:
    column = _column(condition.column)
    present = [value for value in condition.values if value is not None]
    has_null = len(present) < len(condition.values)
    if len(present) == 1:
        equal = column == present[0]
    else:
        equal = column.in_(present) if present else false()
    if not condition.negated:
        return or_(equal, column.is_(None)) if has_null else equal
    unequal = column.not_in(present) if len(present) > 1 else ~equal if present else true()
    if has_null:
        return and_(column.is_not(None), unequal)
    return or_(column.is_(None), unequal) if _nullable(condition.column) else unequal


# ---------------------------------------------------------------- Python


def column_value(record: ActionRecord, name: str) -> Any:
    """The value `to_sql` reads from the column `name` of this row."""
    if name.startswith(DATA_PREFIX):
        data = record.data
        found = data.get(name.removeprefix(DATA_PREFIX)) if isinstance(data, dict) else None
        return found if isinstance(found, str) else None
    return getattr(record, name)


def _compare(value: Any, operator: Operator, bound: Scalar) -> bool:
    if value is None or isinstance(value, str) != isinstance(bound, str):
        return False
    if operator == "<":
        return bool(value < bound)
    if operator == "<=":
        return bool(value <= bound)
    if operator == ">":
        return bool(value > bound)
    return bool(value >= bound)


def matches(condition: Condition, record: ActionRecord) -> bool:
    """The condition on one stored row, with the same meaning `to_sql` gives it."""
    if isinstance(condition, AllOf):
        return all(matches(part, record) for part in condition.parts)
    if isinstance(condition, AnyOf):
        return any(matches(part, record) for part in condition.parts)
    if isinstance(condition, Check):
        return condition.passes(record)
    if isinstance(condition, Not):
        return not matches(condition.part, record)
    value = column_value(record, condition.column)
    if isinstance(condition, Compare):
        return _compare(value, condition.operator, condition.value)
    return (value in condition.values) != condition.negated


def has_checks(condition: Condition) -> bool:
    if isinstance(condition, AllOf | AnyOf):
        return any(has_checks(part) for part in condition.parts)
    if isinstance(condition, Not):
        return has_checks(condition.part)
    return isinstance(condition, Check)


# ---------------------------------------------------------------- running


def ordered(search: ActionSearch, dialect: str) -> Select[Any]:
    # All of `actions` in the table's column order, which is ActionRecord's:
    # rows become records by position (a mapping per row costs a third more).
    query = select(actions).where(to_sql(search.where, dialect))
    if search.newest_first:
        return query.order_by(actions.c.time.desc(), actions.c.id.desc())
    return query.order_by(actions.c.time, actions.c.id)


def run_search(connection: Connection, search: ActionSearch) -> list[ActionRecord]:
    query = ordered(search, connection.dialect.name)
    if not has_checks(search.where):
        rows = connection.execute(query.limit(search.limit))
        return [ActionRecord(*row) for row in rows]
    found: list[ActionRecord] = []
    deadline = time.monotonic() + search.scan_seconds
    for batch in _batches(connection, query):
        for record in batch:
            # Per row: one check may be slow (a regex on a long message).
            half_time.tick()
            if time.monotonic() > deadline:
                raise SearchTooLong(f"gave up after {search.scan_seconds:g} s")
            if matches(search.where, record):
                found.append(record)
                if len(found) == search.limit:
                    return found
    return found


def _batches(connection: Connection, query: Select[Any]) -> Iterator[list[ActionRecord]]:
    # A server-side cursor on PostgreSQL: the rows come as they are checked,
    # not the whole candidate set at once.
    result = connection.execute(query.execution_options(stream_results=True))
    try:
        while rows := result.fetchmany(SCAN_BATCH):
            yield [ActionRecord(*row) for row in rows]
    finally:
        result.close()
