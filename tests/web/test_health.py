"""`/healthz` and `/readyz` on both backends: alive, and ready only while the
database answers at this code's schema and a primary holds its lease."""

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from arbiter.runtime.settings import Settings
from arbiter.storage.engine import make_engine
from arbiter.storage.lease import primary_lease
from arbiter.storage.migrate import head_revision
from arbiter.web.app import create_app
from tests.web.api_support import api_client, api_settings
from tests.web.support import state
from tests.web.test_lease import steal

T = TypeVar("T")


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return api_settings(tmp_path, database_url)


@pytest.fixture
def client(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    with api_client(settings, monkeypatch) as test_client:
        yield test_client


def test_healthz_answers_alive_without_touching_anything(client: TestClient) -> None:
    reply = client.get("/healthz")
    assert (reply.status_code, reply.json()) == (200, {"status": "alive"})
    assert reply.headers["cache-control"] == "no-store"


def test_readyz_lists_its_checks_when_ready(client: TestClient) -> None:
    reply = client.get("/readyz")
    assert reply.status_code == 200
    assert reply.json() == {
        "status": "ready",
        "role": "primary",
        "database": True,
        "migrations": True,
        "lease": True,
    }


def test_a_secondary_is_ready_without_a_lease(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with api_client(api_settings(tmp_path, database_url), monkeypatch):
        pass  # the primary made the schema
    secondary = api_settings(tmp_path, database_url, role="secondary")
    with api_client(secondary, monkeypatch) as client:
        reply = client.get("/readyz")
    assert reply.status_code == 200
    assert reply.json() == {
        "status": "ready",
        "role": "secondary",
        "database": True,
        "migrations": True,
    }


def test_a_schema_of_another_revision_is_not_ready(client: TestClient) -> None:
    with state(client).engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
    reply = client.get("/readyz")
    assert reply.status_code == 503
    body = reply.json()
    assert (body["status"], body["database"], body["migrations"]) == ("not ready", True, False)
    assert body["schema"] == {"database": "ffff", "code": head_revision()}


def test_a_database_that_does_not_answer_is_not_ready(client: TestClient) -> None:
    app_state = state(client)
    real_engine = app_state.engine
    # A loopback port nobody listens on: the connection is refused at once.
    app_state.engine = make_engine("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2")
    try:
        reply = client.get("/readyz")
    finally:
        app_state.engine.dispose()
        app_state.engine = real_engine
    assert reply.status_code == 503
    assert (reply.json()["database"], reply.json()["migrations"]) == (False, False)


def test_a_primary_that_lost_its_lease_is_not_ready_until_it_has_it_again(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = api_settings(tmp_path, database_url, lease_check_seconds=1)
    lease = primary_lease(database_url)
    lease.acquire()
    with TestClient(create_app(settings, lease=lease)) as client:
        assert client.get("/readyz").json()["lease"] is True
        thief = steal(lease, database_url)
        lost = wait_for(lambda: client.get("/readyz"), lambda reply: reply.status_code == 503)
        assert lost.json()["lease"] is False
        thief.release()
        back = wait_for(lambda: client.get("/readyz"), lambda reply: reply.status_code == 200)
        assert back.json()["lease"] is True


def wait_for(ask: Callable[[], T], done: Callable[[T], bool], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        answer = ask()
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)
