"""What every SQL store shares: backend-neutral handling of unique keys and upserts."""

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from arbiter.storage.errors import DuplicateKey

_PG_UNIQUE_VIOLATION = "23505"


def is_unique_violation(error: IntegrityError) -> bool:
    original = error.orig
    if getattr(original, "sqlstate", None) == _PG_UNIQUE_VIOLATION:
        return True
    # sqlite3 has no error codes on the exception before 3.11's sqlite_errorname,
    # and its message is stable: "UNIQUE constraint failed: users.username".
    return str(original).startswith("UNIQUE constraint failed")


@contextmanager
def unique(connection: Connection, what: str, value: object) -> Iterator[None]:
    """Run an insert inside a savepoint and turn a unique violation into DuplicateKey.

    The savepoint matters on PostgreSQL: a failed statement otherwise poisons the
    whole transaction, and the caller may want to carry on (e.g. report the
    duplicate name in a form) within it.
    """
    try:
        with connection.begin_nested():
            yield
    except IntegrityError as error:
        if is_unique_violation(error):
            raise DuplicateKey(what, value) from error
        raise


def upsert(
    connection: Connection, table: Table, key: Mapping[str, Any], values: Mapping[str, Any]
) -> None:
    """INSERT ... ON CONFLICT (key) DO UPDATE, atomic on both backends.

    An update-then-insert would race on PostgreSQL (two writers both find no
    row); both dialects support the same ON CONFLICT clause, so use it.
    """
    insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    statement = insert(table).values({**key, **values})
    statement = statement.on_conflict_do_update(index_elements=list(key), set_=dict(values))
    connection.execute(statement)


def insert_missing(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """INSERT ... ON CONFLICT DO NOTHING for many rows: a row that would repeat a
    stored key (any unique constraint) is left out, the stored one kept as it is."""
    if not rows:
        return
    insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    connection.execute(insert(table).on_conflict_do_nothing(), list(rows))


def upsert_many(
    connection: Connection, table: Table, key: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> None:
    """`upsert` for many rows in one statement: each row inserted, or its
    stored row (the same `key` columns) given the row's other values."""
    if not rows:
        return
    insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    statement = insert(table)
    replaced = {name: statement.excluded[name] for name in rows[0] if name not in key}
    connection.execute(
        statement.on_conflict_do_update(index_elements=list(key), set_=replaced), list(rows)
    )
