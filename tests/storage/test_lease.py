"""The primary's lease (storage/lease.py) on both backends: one holder at a time,
a lost lease is noticed, and it can be taken again once it is free."""

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from arbiter.storage.engine import is_sqlite, normalize_url
from arbiter.storage.errors import DatabaseNotOpened, LeaseHeld
from arbiter.storage.lease import (
    ADVISORY_LOCK_KEY,
    LockFileLease,
    NoLease,
    PrimaryLease,
    primary_lease,
)
from tests.storage.test_unavailable import closed_port


def libpq(url: str) -> str:
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(False)


def end_lease_sessions(admin: psycopg.Connection[Any]) -> None:
    """Terminate the sessions that hold this database's primary lease, as a
    database restart would. Only this database's: the other test process's
    primaries hold the same key on databases of their own in the cluster."""
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
        " AND objid::bigint = %s AND pid <> pg_backend_pid()"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (ADVISORY_LOCK_KEY,),
    )


@pytest.fixture
def first(database_url: str) -> Iterator[PrimaryLease]:
    lease = primary_lease(database_url)
    lease.acquire()
    yield lease
    lease.release()


def test_a_second_lease_is_refused_with_the_holder_named(
    first: PrimaryLease, database_url: str
) -> None:
    second = primary_lease(database_url)
    with pytest.raises(LeaseHeld) as refused:
        second.acquire()
    message = str(refused.value)
    assert f"pid {os.getpid()}" in message
    assert "--role secondary" in message
    assert "\n" not in message
    assert second.try_acquire() is False
    assert not second.held
    assert first.held
    assert first.check()


def test_a_released_lease_can_be_taken(first: PrimaryLease, database_url: str) -> None:
    first.release()
    assert not first.check()
    second = primary_lease(database_url)
    second.acquire()
    try:
        assert second.check()
    finally:
        second.release()


def test_the_lock_file_lies_beside_the_database(sqlite_database_url: str) -> None:
    lease = primary_lease(sqlite_database_url)
    assert isinstance(lease, LockFileLease)
    database = make_url(sqlite_database_url).database
    assert str(lease.path) == f"{database}.primary.lock"


def test_a_replaced_lock_file_is_a_lost_lease(sqlite_database_url: str) -> None:
    lease = primary_lease(sqlite_database_url)
    assert isinstance(lease, LockFileLease)
    lease.acquire()
    try:
        lease.path.unlink()
        other = primary_lease(sqlite_database_url)
        other.acquire()  # the new file is free: this is what the check must notice
        assert not lease.check()
        assert not lease.try_acquire()
        other.release()
        assert lease.try_acquire()
        assert lease.check()
    finally:
        lease.release()


def test_a_killed_postgresql_session_is_a_lost_lease(postgres_database_url: str) -> None:
    lease = primary_lease(postgres_database_url)
    lease.acquire()
    try:
        with psycopg.connect(libpq(postgres_database_url), autocommit=True) as admin:
            end_lease_sessions(admin)
            admin.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
            assert not lease.check()
            assert not lease.try_acquire()  # someone else holds it now
            admin.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
            assert lease.try_acquire()
            assert lease.check()
    finally:
        lease.release()


def test_an_unreachable_postgresql_is_one_line() -> None:
    lease = primary_lease(f"postgresql://postgres@127.0.0.1:{closed_port()}/arbiter")
    with pytest.raises(DatabaseNotOpened) as failed:
        lease.acquire()
    assert str(failed.value).startswith("cannot reach the database postgresql://postgres@")
    assert "\n" not in str(failed.value)
    assert not lease.held


def test_an_in_memory_database_needs_no_lease() -> None:
    assert isinstance(primary_lease("sqlite://"), NoLease)


def test_a_lease_refuses_an_unsupported_url() -> None:
    with pytest.raises(DatabaseNotOpened, match="unsupported database URL scheme 'mysql'"):
        primary_lease("mysql://root@localhost/arbiter")


def test_sqlite_urls_stay_sqlite(sqlite_database_url: str) -> None:
    assert is_sqlite(sqlite_database_url)
