"""Prepared hot writes: the rows they write are the rows Core's execute writes."""

from typing import Any

import pytest
from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError

from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from arbiter.storage.errors import StorageUnavailable
from arbiter.storage.prepared import execute_many, fetch_all, prepare
from arbiter.storage.records import no_results
from arbiter.storage.run_spec import spec_of
from arbiter.storage.schema import runs, tasks
from tests.domain.runs.support import run_record

UPDATE_RUN = update(runs).where(runs.c.id == bindparam("key_id"))
INSERT_TASK = insert(tasks)
RUN_ID = "c" * 24
# A JSON path is a bound parameter with a value of its own.
READ_TASKS = (
    select(tasks.c.task_id, tasks.c.worker_name, tasks.c.worker_info["concurrency"].as_integer())
    .where(tasks.c.run_id == bindparam("run_id"))
    .order_by(tasks.c.task_id)
)


def task_row(task_id: int, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": RUN_ID,
        "task_id": task_id,
        "num_games": 64,
        "start": task_id * 64,
        "active": True,
        "bad": False,
        "last_updated": 1.5,
        "username": "alice",
        "worker_name": "alice-8cores-abcd",
        "unique_key": "abcd-ef",
        "remote_addr": "127.0.0.1",
        "worker_info": {"concurrency": 8, "nested": {"list": [1, 2.5, None, "é"]}},
        **no_results(),
        "residual": None,
        "spsa_params": None,
    }
    return {**row, **changes}


def stored_tasks(storage: Storage) -> list[dict[str, Any]]:
    with storage.read() as tx:
        query = select(tasks).order_by(tasks.c.task_id)
        return [dict(row._mapping) for row in tx.connection.execute(query)]


def test_prepared_inserts_write_what_core_writes(storage: Storage) -> None:
    with storage.write() as tx:
        tx.runs.add(run_record(id=RUN_ID))
        tx.connection.execute(INSERT_TASK, [task_row(0), task_row(1, active=False)])
    by_core = stored_tasks(storage)
    with storage.write() as tx:
        tx.connection.execute(tasks.delete())
        execute_many(tx.connection, INSERT_TASK, [task_row(0), task_row(1, active=False)])
    assert stored_tasks(storage) == by_core
    assert [row["active"] for row in by_core] == [True, False]  # booleans, not 1 and 0
    assert by_core[0]["worker_info"]["nested"] == {"list": [1, 2.5, None, "é"]}


def test_fetch_all_reads_what_core_reads(storage: Storage) -> None:
    with storage.write() as tx:
        tx.runs.add(run_record(id=RUN_ID))
        tx.connection.execute(INSERT_TASK, [task_row(0), task_row(1, worker_name="bob-1cores")])
    with storage.read() as tx:
        by_core = [tuple(row) for row in tx.connection.execute(READ_TASKS, {"run_id": RUN_ID})]
        assert fetch_all(tx.connection, READ_TASKS, {"run_id": RUN_ID}) == by_core
        assert fetch_all(tx.connection, READ_TASKS, {"run_id": "d" * 24}) == []
    assert by_core == [(0, "alice-8cores-abcd", 8), (1, "bob-1cores", 8)]


def test_prepared_updates_set_only_the_given_columns_of_the_keyed_row(storage: Storage) -> None:
    run = run_record(id="a" * 24, args={"sprt": {"llr": 0.0}})
    other = run_record(id="b" * 24, args={"sprt": {"llr": 0.0}})
    with storage.write() as tx:
        tx.runs.add(run)
        tx.runs.add(other)
    moved = spec_of({"sprt": {"llr": 1.25}})
    rows = [{"key_id": run.id, "args": moved, "finished": True, "wins": 7}]
    with storage.write() as tx:
        execute_many(tx.connection, UPDATE_RUN, rows)
    with storage.read() as tx:
        changed, untouched = tx.runs.get(run.id), tx.runs.get(other.id)
    assert changed is not None
    assert untouched is not None
    assert (changed.args, changed.finished, changed.wins) == (moved, True, 7)
    assert changed.losses == run.losses
    assert changed.username == run.username
    assert untouched == other


def test_a_statement_is_compiled_once_per_dialect_and_column_set(storage: Storage) -> None:
    dialect = storage.engine.dialect
    first = prepare(UPDATE_RUN, dialect, frozenset({"key_id", "wins"}))
    assert prepare(UPDATE_RUN, dialect, frozenset({"key_id", "wins"})) is first
    assert prepare(UPDATE_RUN, dialect, frozenset({"key_id", "losses"})) is not first
    assert set(first.names) == {"key_id", "wins"}


def test_a_row_without_the_statements_own_parameter_is_refused(storage: Storage) -> None:
    with pytest.raises(ValueError, match="key_id"):
        prepare(UPDATE_RUN, storage.engine.dialect, frozenset({"wins"}))


def test_no_rows_execute_nothing(storage: Storage) -> None:
    with storage.write() as tx:
        execute_many(tx.connection, INSERT_TASK, [])
    assert stored_tasks(storage) == []


def test_a_driver_error_is_raised_as_sqlalchemy_raises_it_and_writes_nothing(
    storage: Storage,
) -> None:
    with storage.write() as tx:
        tx.runs.add(run_record(id=RUN_ID))
    with pytest.raises(IntegrityError) as raised, storage.write() as tx:
        execute_many(tx.connection, INSERT_TASK, [task_row(0), task_row(0)])
    assert isinstance(raised.value.orig, Exception)
    assert "INSERT INTO tasks" in str(raised.value.statement)
    assert stored_tasks(storage) == []


def test_a_lost_connection_is_invalidated_as_sqlalchemy_would(postgres_database_url: str) -> None:
    """PostgreSQL only: a SQLite file cannot drop its connection."""
    engine = make_engine(postgres_database_url, pool_size=5)
    try:
        lose_the_connection_mid_write(Storage(engine))
    finally:
        engine.dispose()


def lose_the_connection_mid_write(storage: Storage) -> None:
    with storage.write() as tx:
        tx.runs.add(run_record(id=RUN_ID))
    with pytest.raises(StorageUnavailable) as raised, storage.write() as tx:  # noqa: PT012
        pid = tx.connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with storage.engine.connect() as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            other.commit()
        execute_many(tx.connection, INSERT_TASK, [task_row(0)])
    cause = raised.value.__cause__
    assert isinstance(cause, OperationalError)
    assert cause.connection_invalidated
    assert stored_tasks(storage) == []  # and the pool hands out a working connection again
