"""Walks the route table: every state-changing page route refuses a missing or
wrong CSRF token and changes nothing; authenticated pages are never cached."""

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from starlette.routing import Route
from starlette.testclient import TestClient

from arbiter.runtime.settings import Settings
from arbiter.storage.engine import sqlite_url
from arbiter.storage.schema import metadata
from arbiter.web.app import create_app
from arbiter.web.routes import MONITORING_PATHS, routes
from tests.web.runs_support import submit, users
from tests.web.support import log_in, make_user, state

WORKER = "alice-4cores-abcd"


# Not pages: the same bytes for everyone, cached by browsers.
ASSET_PATHS = frozenset({"/favicon.ico"})


def page_routes(method: str) -> list[str]:
    return sorted(
        {
            route.path
            for route in routes()
            if isinstance(route, Route)
            and method in (route.methods or ())
            and not route.path.startswith("/api/")
            and route.path not in MONITORING_PATHS
            and route.path not in ASSET_PATHS
        }
    )


def concrete(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values[m.group(1)], path)


@pytest.fixture(scope="module")
def shared_client(
    tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[TestClient]:
    """One app for the whole walk: every request here is refused, so tests
    cannot disturb each other (and each checks that nothing changed)."""
    data_dir = tmp_path_factory.mktemp("csrf-walk")
    shutil.copy(sqlite_template, data_dir / "arbiter.sqlite3")
    settings = Settings(
        data_dir=data_dir,
        database_url=sqlite_url(data_dir),
        secret_key="test-secret",
        argon2_time_cost=1,
        argon2_memory_kib=8,
        git_allow="file",  # the test repository is a file:// URL
    )
    with TestClient(create_app(settings), base_url="http://testserver") as test_client:
        yield test_client


@pytest.fixture(scope="module")
def world(shared_client: TestClient, repo_url: str) -> dict[str, str]:
    """An approver logged in, another user, a run, a worker token: things to change."""
    client = shared_client
    alice, _ = users(client)
    make_user(client, "bob")
    state(client).accounts.update_profile("bob", email="bob@example.org", tests_repo="")
    run_id = submit(client, alice, repo_url)
    state(client).accounts.create_token("root", "laptop")
    log_in(client, "root")
    token_id = state(client).accounts.list_tokens("root")[0].id
    root = state(client).accounts.get_user("root")
    assert root is not None
    hook = state(client).webhooks.register(root, "https://example.org/hook", ["finished"], "json")
    return {
        "run_id": run_id,
        "username": "bob",
        "token_id": str(token_id),
        "worker_name": WORKER,
        "hook_id": str(hook.id),
    }


def snapshot(client: TestClient) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table (sessions aside: reading a page may touch one)."""
    engine = state(client).engine
    with engine.connect() as connection:
        return {
            table.name: sorted(map(tuple, connection.execute(select(table))), key=repr)
            for table in metadata.sorted_tables
            if table.name != "sessions"
        }


def test_the_walk_covers_the_dashboard_forms() -> None:
    posts = page_routes("POST")
    for path in ("/tests/run", "/tests/view/{run_id}/approve", "/workers/{worker_name}", "/login"):
        assert path in posts


@pytest.mark.parametrize("path", page_routes("POST"))
@pytest.mark.parametrize("token", ["missing", "wrong"])
def test_state_changing_routes_refuse_a_bad_csrf_token(
    shared_client: TestClient, world: dict[str, str], path: str, token: str
) -> None:
    client = shared_client
    before = snapshot(client)
    form = {} if token == "missing" else {"csrf_token": "0" * 64}
    form.update(username="root", password="x", blocked="true", num_games="2000")
    reply = client.post(concrete(path, world), data=form, follow_redirects=False)
    assert reply.status_code == 403, (path, reply.status_code)
    assert "This form has expired" in reply.text
    assert snapshot(client) == before


@pytest.mark.parametrize("path", page_routes("GET"))
def test_authenticated_pages_are_not_stored(
    shared_client: TestClient, world: dict[str, str], path: str
) -> None:
    client = shared_client
    reply = client.get(concrete(path, world), follow_redirects=False)
    if reply.status_code == 200:  # a page, or the notifications' JSON
        assert reply.headers["cache-control"] == "no-store"
    else:
        assert reply.status_code in (302, 303, 307), (path, reply.status_code)


def test_live_fragments_of_authenticated_pages_are_not_stored(
    shared_client: TestClient, world: dict[str, str]
) -> None:
    client = shared_client
    for path in ("/tests?live=1", f"/tests/view/{world['run_id']}?live=1"):
        assert client.get(path).headers["cache-control"] == "no-store"


def test_anonymous_pages_are_private(client: TestClient) -> None:
    assert client.get("/tests").headers["cache-control"] == "no-cache, private"
