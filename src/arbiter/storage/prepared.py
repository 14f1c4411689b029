"""The hot writes (a task and a run row per batch of result updates), compiled
once per dialect and set of columns and sent as the driver's own statement;
and long narrow reads, fetched by the driver's own cursor in one call.

`Connection.execute` compiles a Core statement's parameters on every call: on
the fleet benchmark's profiles, three quarters of an UPDATE's cost was SQLAlchemy's
per-call work (execution context, parameter construction, result set-up), not
the database's. Here a statement is compiled once for each column set it is
used with, each value passes through the column type's own bind processor (the
JSON columns' encoder, SQLite's booleans), and `send_many` hands it to the
driver's cursor, raising errors and invalidating a lost connection as SQLAlchemy
does for any statement of the transaction. `fetch_all` reads the rows of a
SELECT the same way: for thousands of narrow rows, SQLAlchemy's per-row
result handling cost four times the database's reading (5,000 tasks' ids and
machines: 25 ms against 6 on SQLite). Statement events
(`before_cursor_execute`) do not see these writes; nothing of ours listens.
[THREADPOOL: called inside a write transaction]
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Dialect, Select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import ValuesBase

Processor = Callable[[Any], Any] | None
T = TypeVar("T")


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


# Keyed by the statement's id: only statements that live as long as the
# process (module constants) are prepared.
_CACHE: dict[tuple[int, str, frozenset[str]], Prepared] = {}
_READS: dict[tuple[int, str, frozenset[str]], tuple[Prepared, dict[str, Any]]] = {}


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
    return _prepared(compiled, dialect, names)


def _prepared(compiled: Any, dialect: Dialect, names: frozenset[str]) -> Prepared:
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
    send_many(connection, prepared.sql, parameters)


def fetch_all(
    connection: Connection, statement: Select[Any], values: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """Every row of `statement` as the driver returns it, its bind parameters
    (`bindparam`s, named) taken from `values`. Only for columns whose values
    need no conversion on the way out (integers, text)."""
    key = (id(statement), connection.dialect.name, frozenset(values))
    found = _READS.get(key)
    if found is None:
        compiled = statement.compile(dialect=connection.dialect)
        # Parameters with a value of their own (a JSON path) keep it.
        fixed = {name: bind.effective_value for name, bind in compiled.binds.items()}
        names = frozenset(fixed) | frozenset(values)
        found = _READS[key] = (_prepared(compiled, connection.dialect, names), fixed)
    prepared, fixed = found
    parameters = prepared.parameters({**fixed, **values})

    def read(cursor: Any) -> list[tuple[Any, ...]]:
        cursor.execute(prepared.sql, parameters)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

    return _on_cursor(connection, prepared.sql, parameters, read)


def fetch_row(
    connection: Connection, sql: str, parameters: Sequence[Any]
) -> tuple[Any, ...] | None:
    """The first row of driver-level `sql` (the driver's parameter style), sent
    as `send_many` sends: for a statement run before every write (the lease's fence)."""

    def read(cursor: Any) -> tuple[Any, ...] | None:
        cursor.execute(sql, parameters)
        row: tuple[Any, ...] | None = cursor.fetchone()
        return row

    return _on_cursor(connection, sql, parameters, read)


def send_many(connection: Connection, sql: str, parameters: Sequence[Any]) -> None:
    """`sql` once per parameter set, on a cursor of the transaction's own driver
    connection. `exec_driver_sql` spent 20 us of a one-row UPDATE's 23 us on its
    execution context (measured on the fleet). Errors are raised as SQLAlchemy raises them, a
    DBAPIError around the driver's error, and a lost connection is invalidated
    as SQLAlchemy would, so callers see no difference."""
    _on_cursor(connection, sql, parameters, lambda cursor: cursor.executemany(sql, parameters))


def _on_cursor(connection: Connection, sql: str, parameters: Any, use: Callable[[Any], T]) -> T:
    """`use` of a cursor of the transaction's driver connection, which sends
    `sql` with `parameters` (named in the errors raised)."""
    dialect = connection.dialect
    dbapi_connection = connection.connection
    cursor = dbapi_connection.cursor()
    try:
        return use(cursor)
    except dialect.loaded_dbapi.Error as error:
        lost = dialect.is_disconnect(error, dbapi_connection, cursor)
        if lost:
            connection.invalidate(error)
        raise DBAPIError.instance(
            sql, parameters, error, dialect.loaded_dbapi.Error, connection_invalidated=lost
        ) from error
    finally:
        cursor.close()
