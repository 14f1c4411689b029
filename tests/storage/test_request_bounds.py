"""Bounds on a request's database work (storage/request_bounds.py), enforced by
the database on both backends: the request bound stops a statement, work
outside a request is not bounded, and an abandoned request's running read is
stopped and no read of it starts any more, while its writes end normally."""

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import text

from arbiter.storage import QueryAbandoned, QueryTooLong, Storage
from arbiter.storage.engine import make_engine, request_bound
from arbiter.storage.request_bounds import RequestQueries, current, serving

HANG_GUARD = 30.0  # s: only a hang fails this, never a slow host
ENDLESS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
    "SELECT count(*) FROM c"
)


@pytest.fixture
def bounded_storage(database_url: str) -> Iterator[Callable[[float], Storage]]:
    """Storage on an engine with the given request bound (seconds)."""
    engines = []

    def make(seconds: float) -> Storage:
        engine = make_engine(database_url, pool_size=5, request_seconds=seconds)
        engines.append(engine)
        return Storage(engine)

    yield make
    for engine in engines:
        engine.dispose()


def finite_work(database_url: str) -> str:
    """A statement that runs for a few tenths of a second, then ends."""
    if database_url.startswith("sqlite"):
        return (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
            "SELECT count(*) FROM c"
        )
    return "SELECT pg_sleep(0.4)"


def test_a_request_read_and_write_are_stopped_at_the_bound(
    bounded_storage: Callable[[float], Storage],
) -> None:
    storage = bounded_storage(0.2)
    with serving(RequestQueries()):
        for transaction in (storage.read, storage.write):
            started = time.monotonic()
            with pytest.raises(QueryTooLong, match=r"past 0\.2 s"), transaction() as tx:
                tx.connection.exec_driver_sql(ENDLESS)
            assert time.monotonic() - started < HANG_GUARD
        for _ in range(6):  # every pooled connection serves again, bounded as before
            with storage.read() as tx:
                assert tx.connection.exec_driver_sql("SELECT 1").scalar() == 1


def test_work_outside_a_request_has_no_bound(
    bounded_storage: Callable[[float], Storage], database_url: str
) -> None:
    """Jobs and commands run outside any request: a statement longer than the
    request bound ends normally, on connections that served requests before."""
    storage = bounded_storage(0.05)
    assert current() is None
    with serving(RequestQueries()), storage.read() as tx:  # a request used a connection
        tx.connection.exec_driver_sql("SELECT 1")
    for transaction in (storage.read, storage.write):
        with transaction() as tx:
            tx.connection.exec_driver_sql(finite_work(database_url))


def test_a_bound_of_zero_bounds_nothing(
    bounded_storage: Callable[[float], Storage], database_url: str
) -> None:
    storage = bounded_storage(0)
    assert request_bound(storage.engine) == 0
    with serving(RequestQueries()), storage.read() as tx:
        tx.connection.exec_driver_sql(finite_work(database_url))


def test_a_time_limited_read_keeps_its_own_limit_inside_a_request(
    bounded_storage: Callable[[float], Storage],
) -> None:
    storage = bounded_storage(60)
    with (
        serving(RequestQueries()),
        pytest.raises(QueryTooLong, match=r"past 0\.2 s"),
        storage.read(time_limit=0.2) as tx,
    ):
        tx.connection.exec_driver_sql(ENDLESS)


def wait_until_running(storage: Storage, queries: RequestQueries, database_url: str) -> None:
    """Until the request's statement runs: on PostgreSQL, as the server sees it
    (a cancel request for a statement not yet begun would be lost)."""
    deadline = time.monotonic() + HANG_GUARD
    while queries.running() == 0:
        assert time.monotonic() < deadline, "the request's transaction never began"
        time.sleep(0.01)
    if database_url.startswith("sqlite"):
        return
    seen = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE state = 'active' AND query LIKE 'WITH RECURSIVE%'"
    )
    while True:
        with storage.read() as tx:
            if tx.connection.execute(seen).scalar():
                return
        assert time.monotonic() < deadline, "the request's statement never began"
        time.sleep(0.01)


def test_an_abandoned_request_stops_its_running_statement(
    bounded_storage: Callable[[float], Storage], database_url: str
) -> None:
    """With no bound at all, only the abandonment can stop the statement."""
    storage = bounded_storage(0)
    queries = RequestQueries()
    outcome: list[BaseException | None] = []

    def request() -> None:
        try:
            with serving(queries), storage.read() as tx:
                tx.connection.exec_driver_sql(ENDLESS)
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=request)
    thread.start()
    wait_until_running(storage, queries, database_url)
    queries.abandon()
    thread.join(HANG_GUARD)
    assert not thread.is_alive(), "the abandoned statement went on running"
    assert isinstance(outcome[0], QueryAbandoned)
    assert queries.running() == 0
    for _ in range(6):
        with storage.read() as tx:
            assert tx.connection.exec_driver_sql("SELECT 1").scalar() == 1


def test_an_abandoned_request_starts_no_read_but_its_writes_end_within_the_bound(
    bounded_storage: Callable[[float], Storage],
) -> None:
    """A handler is never cut between two writes by its client leaving: the
    writes go on, bounded as before."""
    storage = bounded_storage(0.2)
    queries = RequestQueries()
    queries.abandon()
    with serving(queries):
        with pytest.raises(QueryAbandoned, match="client went away"), storage.read():
            pytest.fail("the read began")
        with storage.write() as tx:
            tx.kv.set("written", "after the client left")
        with pytest.raises(QueryTooLong), storage.write() as tx:
            tx.connection.exec_driver_sql(ENDLESS)
    with storage.read() as tx:  # outside the request, all is as before
        assert tx.kv.get("written") == "after the client left"
