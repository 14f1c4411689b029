"""Keeping the primary's lease (web/lease.py), on both backends with real leases:
a lost lease takes the worker API and the jobs offline, a lease taken back
brings them back, unless another primary served in between."""

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from starlette.testclient import TestClient

import arbiter.web.app as app_module
from arbiter.jobs import Job
from arbiter.protocol import WORKER_PATHS
from arbiter.runtime.state import AppState
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from arbiter.storage.errors import LeaseHeld
from arbiter.storage.lease import LockFileLease, PrimaryLease, primary_lease
from arbiter.web.app import create_app
from arbiter.web.lease import MARKER_KEY, LeaseKeeper, paused_without_lease
from arbiter.web.middleware import SECONDARY_WORKER_PATHS
from tests.storage.test_lease import end_lease_sessions, libpq
from tests.web.api_support import api_settings

HOUR = 3600.0  # the keeper's own thread stays asleep: the tests check by hand


@pytest.fixture
def storage(database_url: str) -> Iterator[Storage]:
    engine = make_engine(database_url, pool_size=2)
    yield Storage(engine)
    engine.dispose()


@pytest.fixture
def keeper(database_url: str, storage: Storage) -> Iterator[LeaseKeeper]:
    lease = primary_lease(database_url)
    lease.acquire()
    keeper = LeaseKeeper(lease, HOUR)
    keeper.start(storage)
    yield keeper
    keeper.stop()


def steal(lease: PrimaryLease, database_url: str) -> PrimaryLease:
    """End `lease` behind its back (its session killed, its lock file replaced) and
    hand it to another holder, as a second primary would take it."""
    if isinstance(lease, LockFileLease):
        lease.path.unlink()
    else:
        with psycopg.connect(libpq(database_url), autocommit=True) as admin:
            end_lease_sessions(admin)
    thief = primary_lease(database_url)
    deadline = time.monotonic() + 10
    while True:  # a terminated backend lets go of its lock a moment later
        try:
            thief.acquire()
            return thief
        except LeaseHeld:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_lost_lease_stops_serving_until_it_is_taken_back(
    keeper: LeaseKeeper, database_url: str
) -> None:
    assert keeper.serving
    thief = steal(keeper.lease, database_url)
    assert keeper.check_once()
    assert not keeper.serving
    assert keeper.check_once()
    assert not keeper.serving
    thief.release()
    assert keeper.check_once()
    assert keeper.serving
    assert keeper.lease.check()


def test_a_primary_that_served_meanwhile_makes_the_keeper_give_up(
    keeper: LeaseKeeper, database_url: str, storage: Storage
) -> None:
    thief = steal(keeper.lease, database_url)
    keeper.check_once()
    other = LeaseKeeper(thief, HOUR)
    other.start(storage)  # the other primary marks the database as its own
    other.stop()
    assert keeper.check_once() is False
    assert not keeper.serving
    assert not keeper.lease.held  # given back, so a fresh primary can start
    with storage.read() as tx:
        assert tx.kv.get(MARKER_KEY)["token"] == other.token


def test_jobs_skip_their_runs_while_the_lease_is_lost(
    keeper: LeaseKeeper, database_url: str
) -> None:
    runs: list[str] = []
    table = paused_without_lease(
        lambda _state: [Job("count", 60, 60, lambda: runs.append("run"))], keeper
    )
    (job,) = table(AppState.__new__(AppState))
    job.function()
    thief = steal(keeper.lease, database_url)
    keeper.check_once()
    job.function()
    assert runs == ["run"]
    thief.release()
    keeper.check_once()
    job.function()
    assert runs == ["run", "run"]


PRIMARY_ONLY = [path for path in WORKER_PATHS if path not in SECONDARY_WORKER_PATHS]


def wait_for_status(client: TestClient, status: int) -> object:
    """Poll a worker call until it answers `status` (the keeper checks every second)."""
    deadline = time.monotonic() + 10
    while True:
        reply = client.post("/api/request_version", json={})
        if reply.status_code == status or time.monotonic() > deadline:
            assert reply.status_code == status, reply.text
            body: object = reply.json()
            return body
        time.sleep(0.05)


def test_a_primary_without_its_lease_answers_worker_calls_with_json_503(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_module, "DRAIN_SECONDS", 0.0)
    lease = primary_lease(database_url)
    lease.acquire()
    settings = api_settings(tmp_path, database_url, lease_check_seconds=1)
    with TestClient(create_app(settings, lease=lease)) as client:
        wait_for_status(client, 400)  # serving: the empty body is what is wrong
        thief = steal(lease, database_url)
        body = wait_for_status(client, 503)
        assert body == "/api/request_version: primary lease lost, retry shortly"
        for path in PRIMARY_ONLY:
            reply = client.post(path, json={})
            assert reply.status_code == 503, path
            assert "primary lease lost" in reply.json()
        assert client.get("/api/active_runs").status_code == 200  # reads go on
        thief.release()
        wait_for_status(client, 400)
    assert not lease.held  # shutdown gave it back
