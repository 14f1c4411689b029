"""The hot writes (a task and a run row per batch of result updates), compiled
once per dialect and set of columns and sent as the driver's own statement.

`Connection.execute` compiles a Core statement's parameters on every call: on
issue 19's profiles, three quarters of an UPDATE's cost was SQLAlchemy's
per-call work (execution context, parameter construction, result set-up), not
the database's. Here a statement is compiled once for each column set it is
used with, each value passes through the column type's own bind processor (the
JSON columns' encoder, SQLite's booleans), and `exec_driver_sql` sends it, so
errors, connection invalidation and events behave as for any other statement
of the transaction. [THREADPOOL: called inside a write transaction]
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Dialect
from sqlalchemy.sql.dml import ValuesBase

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class Prepared:
    """One compiled form: its SQL text and, in the order (positional styles) or
    under the names (named styles) the driver wants them, each parameter's name
    and bind processor."""

    sql: str
    names: tuple[str, ...]
    processors: tuple[Processor, ...]
    positional: bool

    def parameters(self, row: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        values = [
            row[name] if processor is None else processor(row[name])
            for name, processor in zip(self.names, self.processors, strict=True)
        ]
        return tuple(values) if self.positional else dict(zip(self.names, values, strict=True))


_CACHE: dict[tuple[int, str, frozenset[str]], Prepared] = {}


def prepare(statement: ValuesBase, dialect: Dialect, names: frozenset[str]) -> Prepared:
    """`statement` compiled for `dialect`, setting the columns among `names` (the
    others are the statement's own bind parameters, such as a WHERE's keys)."""
    key = (id(statement), dialect.name, names)
    prepared = _CACHE.get(key)
    if prepared is None:
        prepared = _CACHE[key] = _compile(statement, dialect, names)
    return prepared


def _compile(statement: ValuesBase, dialect: Dialect, names: frozenset[str]) -> Prepared:
    columns = {column.key for column in statement.table.columns}
    compiled = statement.compile(
        dialect=dialect, column_keys=sorted(name for name in names if name in columns)
    )
    positions = compiled.positiontup
    positional = positions is not None
    order = tuple(positions) if positions is not None else tuple(compiled.binds)
    missing = set(order) - names
    if missing:
        raise ValueError(f"no value for {sorted(missing)} in {compiled.string!r}")
    processors = tuple(
        compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in order
    )
    return Prepared(compiled.string, order, processors, positional)


def execute_many(
    connection: Connection, statement: ValuesBase, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Execute `statement` once per row; every row has the same keys."""
    if not rows:
        return
    prepared = prepare(statement, connection.dialect, frozenset(rows[0]))
    parameters = [prepared.parameters(row) for row in rows]
    connection.exec_driver_sql(prepared.sql, parameters)
