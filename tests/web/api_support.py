"""Helpers for the JSON API contract tests: an app on either backend, worker
bodies as a worker sends them, and a snapshot of everything a request may change.

The fixtures live in the test modules (a few lines each); what they share is here.
"""

import base64
import gzip
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from argon2 import PasswordHasher
from sqlalchemy import select
from starlette.testclient import TestClient

from arbiter.domain.accounts import User
from arbiter.protocol.messages import Stats
from arbiter.runtime.settings import Settings
from arbiter.storage.base import ActionFilter, NewUser
from arbiter.storage.records import RunRecord, TaskRecord
from arbiter.storage.schema import metadata
from arbiter.web import app as app_module
from arbiter.web.app import create_app
from tests.domain.runs.support import worker
from tests.web.support import STRONG_PASSWORD, state

# Touched on use (last_used, last_seen): bookkeeping, not state a request changes.
UNSNAPSHOTTED = frozenset({"sessions", "worker_tokens"})
# Columns written by a correct password alone (the worker proof): bookkeeping too.
UNSNAPSHOTTED_COLUMNS = frozenset({"worker_proof"})

_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)  # as the test apps

# The worker calls a secondary refuses, written out here rather than read from
# the product: a path moved to the secondary's side by mistake must fail a test.
PRIMARY_ONLY_WORKER_PATHS = (
    "/api/request_version",
    "/api/request_task",
    "/api/update_task",
    "/api/beat",
    "/api/request_spsa",
    "/api/failed_task",
    "/api/stop_run",
    "/api/worker_log",
)

PGN = base64.b64encode(gzip.compress(b'[Event "x"]\n[Result "1-0"]\n\n1. e4 1-0\n')).decode()


def api_settings(tmp_path: Path, database_url: str, **changes: Any) -> Settings:
    """An app on `database_url` without background jobs, so nothing moves on its own.

    It never sheds load: under TestClient the app's event loop runs in a thread of
    the test process, so its lag counts the tests' own pauses (a collection of
    the whole suite's heap, a busy CI machine) and would turn calls away at
    random. The overload tests turn shedding back on."""
    defaults: dict[str, Any] = {
        "secret_key": "test-secret",
        "argon2_time_cost": 1,
        "argon2_memory_kib": 8,
        "jobs": False,
        "git_allow": "file",  # test repositories are file:// URLs
        "overload_lag_ms": 0,
        "books_url": "",  # no check of the books repository: the catalogue's default book
        "signup_proof_of_work": 1000,  # real proofs, solved fast by the tests
    }
    return Settings(data_dir=tmp_path, database_url=database_url, **{**defaults, **changes})


@contextmanager
def api_client(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    # The half-second shutdown drain is for live connections; tests have none.
    monkeypatch.setattr(app_module, "DRAIN_SECONDS", 0.0)
    with TestClient(create_app(settings), base_url="http://testserver") as client:
        yield client


# ---------------------------------------------------------------- bodies


def worker_info(username: str = "alice", key: str = "abcd", **overrides: Any) -> dict[str, Any]:
    """A full worker_info as a worker sends it (JSON values)."""
    info: dict[str, Any] = msgspec.to_builtins(worker(username, key=key, **overrides))
    return info


def worker_body(
    username: str = "alice",
    key: str = "abcd",
    *,
    password: str = STRONG_PASSWORD,
    info: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A worker request body: credentials, the full worker_info, then `fields`."""
    return {
        "password": password,
        "worker_info": info if info is not None else worker_info(username, key),
        **fields,
    }


def wire(stats: Stats) -> dict[str, Any]:
    """Stats as JSON, which is also how a run's or task's `results` view shows them."""
    wired: dict[str, Any] = msgspec.to_builtins(stats)
    return wired


def post(client: TestClient, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    """POST a JSON body; (status, reply), checking the reply carries `duration`."""
    reply = client.post(path, json=body)
    payload: dict[str, Any] = reply.json()
    assert isinstance(payload.get("duration"), float), (path, payload)
    return reply.status_code, payload


# ---------------------------------------------------------------- runs


def add_user(client: TestClient, name: str, *, approver: bool = False) -> User:
    """An active account with STRONG_PASSWORD, stored directly: `make_user`'s
    strength check (zxcvbn) would cost every test ~10 ms per user."""
    record = NewUser(
        username=name,
        email=f"{name}@example.org",
        password_hash=_HASHER.hash(STRONG_PASSWORD),
        registration_time=time.time(),
        pending=False,
        is_approver=approver,
    )
    with state(client).storage.write() as tx:
        return User.from_record(tx.users.add(record))


def users(client: TestClient) -> tuple[User, User]:
    """alice (a tester) and root (an approver)."""
    return add_user(client, "alice"), add_user(client, "root", approver=True)


@contextmanager
def api_with_users(
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    *others: str,
    **changes: Any,
) -> Iterator[TestClient]:
    """The app on `database_url` with alice (a tester), root (an approver) and
    `others`; `changes` to api_settings."""
    settings = api_settings(tmp_path, database_url, **changes)
    with api_client(settings, monkeypatch) as client:
        users(client)
        for name in others:
            add_user(client, name)
        yield client


def user(client: TestClient, name: str) -> User:
    found = state(client).accounts.get_user(name)
    assert found is not None
    return found


def submit(client: TestClient, owner: str, repo_url: str, **args: Any) -> str:
    body = {"tests_repo": repo_url, "base_tag": "master", "new_tag": "patch", **args}
    return state(client).runs.lifecycle.submit(user(client, owner), body)


def approved(client: TestClient, repo_url: str, **args: Any) -> str:
    """A run of alice's, approved by root."""
    run_id = submit(client, "alice", repo_url, **args)
    state(client).runs.lifecycle.approve(user(client, "root"), run_id)
    return run_id


def take_task(client: TestClient, username: str = "alice", key: str = "abcd") -> dict[str, Any]:
    status, reply = post(client, "/api/request_task", worker_body(username, key))
    assert (status, "task_id" in reply) == (200, True), reply
    return reply


def stored_run(client: TestClient, run_id: str) -> RunRecord:
    with state(client).storage.read() as tx:
        run = tx.runs.get(run_id)
    assert run is not None
    return run


def stored_task(client: TestClient, run_id: str, task_id: int) -> TaskRecord:
    with state(client).storage.read() as tx:
        task = tx.tasks.get(run_id, task_id)
    assert task is not None
    return task


def actions(client: TestClient) -> list[dict[str, Any]]:
    """The audit log, newest first."""
    return state(client).actions.list(ActionFilter(max_count=5000))


# ---------------------------------------------------------------- snapshots


@dataclass(frozen=True)
class Snapshot:
    """Every stored row a request could change, and the primary's live runs."""

    tables: dict[str, list[tuple[Any, ...]]]
    live: list[tuple[RunRecord, tuple[TaskRecord, ...]]]

    def changed_tables(self, other: "Snapshot") -> list[str]:
        return [name for name in self.tables if self.tables[name] != other.tables[name]]


def snapshot(client: TestClient) -> Snapshot:
    tables: dict[str, list[tuple[Any, ...]]] = {}
    with state(client).storage.read() as tx:
        for table in metadata.sorted_tables:
            if table.name not in UNSNAPSHOTTED:
                columns = [c for c in table.c if c.name not in UNSNAPSHOTTED_COLUMNS]
                rows = tx.connection.execute(select(*columns)).all()
                tables[table.name] = sorted((tuple(row) for row in rows), key=repr)
    live = sorted(
        ((s.run, tuple(s.tasks)) for s in state(client).runs.context.registry.states()),
        key=lambda item: item[0].id,
    )
    return Snapshot(tables, live)


@contextmanager
def unchanged(client: TestClient) -> Iterator[None]:
    """The block must leave every table and the live runs exactly as they were."""
    before = snapshot(client)
    yield
    after = snapshot(client)
    assert before.changed_tables(after) == [], "stored rows changed"
    assert before.live == after.live, "live runs changed"
