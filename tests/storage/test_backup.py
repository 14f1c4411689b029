"""`arbiter db backup` / `arbiter db restore` on both backends, against a real
server: a backup taken while a fleet reports results is one consistent moment
(every task between what was acknowledged before and sent after, the run's
totals the sum of its tasks), and a restored database serves the same runs and
totals as the server it was taken from."""

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from arbiter.storage.engine import normalize_url
from tests.conftest import postgres_admin_url
from tests.web.live_server import Server, create_token, create_user, start_server, stop
from tests.web.test_crash_safety import Ledger, request_task, stats_after, submit_run, worker_info

WORKERS = 4


def arbiter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arbiter", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )


def storage_args(data: Path, database_url: str) -> list[str]:
    return ["--data-dir", str(data), *(["--database-url", database_url] if database_url else [])]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql" and postgres_admin_url() is None:
        pytest.skip("PostgreSQL not available (set ARBITER_TEST_POSTGRES_URL)")
    return str(request.param)


@pytest.fixture
def empty_database(backend: str) -> Iterator[str]:
    """A database to restore into: "" (SQLite in a data dir) or an empty PostgreSQL one."""
    if backend == "sqlite":
        yield ""
        return
    admin = postgres_admin_url()
    assert admin is not None
    name = f"arbiter_restore_{uuid.uuid4().hex[:12]}"
    libpq = make_url(normalize_url(admin)).set(drivername="postgresql")
    with psycopg.connect(libpq.render_as_string(False), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield str(make_url(normalize_url(admin)).set(database=name).render_as_string(False))
    with psycopg.connect(libpq.render_as_string(False), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def source_database(backend: str, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return ""
    return str(request.getfixturevalue("postgres_database_url"))


def report(
    url: str, token: str, index: int, run_id: str, ledger: Ledger, stop: threading.Event
) -> None:
    """One worker: a task, then one game pair more per update until told to stop."""
    info = worker_info(index)
    with httpx.Client(base_url=url, timeout=10.0) as client:
        body = request_task(client, token, info)
        if "task_id" not in body:
            ledger.errors.append(f"no task: {body}")
            return
        ledger.task_id = body["task_id"]
        while not stop.is_set():
            ledger.sent += 1
            payload = {
                "password": token,
                "worker_info": info,
                "run_id": run_id,
                "task_id": ledger.task_id,
                "stats": stats_after(ledger.sent),
            }
            reply = client.post("/api/update_task", json=payload)
            if reply.status_code != 200 or reply.json().get("task_alive") is not True:
                ledger.errors.append(reply.text)
                return
            ledger.acked = ledger.sent


def served(server: Server, run_id: str, task_ids: list[int]) -> dict[str, Any]:
    run = httpx.get(f"{server.url}/api/get_run/{run_id}").json()
    tasks = [httpx.get(f"{server.url}/api/get_task/{run_id}/{t}").json() for t in task_ids]
    runs = httpx.get(f"{server.url}/api/active_runs").json()
    return {
        "results": run["results"],
        "tasks": [task["stats"] for task in tasks],
        "active_runs": sorted(runs),
    }


def test_a_backup_under_load_restores_into_a_server_with_the_same_runs_and_totals(
    tmp_path: Path, source_database: str, empty_database: str, repo_url: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    create_user(data, "alice", source_database)
    create_user(data, "root", source_database, approver=True)
    alice = create_token(data, "alice", source_database)
    root = create_token(data, "root", source_database)
    under_load, quiet = tmp_path / "under-load.backup", tmp_path / "quiet.backup"
    server = start_server(data, source_database)
    try:
        run_id = submit_run(server, alice, root, repo_url)
        ledgers = [Ledger() for _ in range(WORKERS)]
        stopping = threading.Event()
        threads = [
            threading.Thread(
                target=report, args=(server.url, alice, i, run_id, ledgers[i], stopping)
            )
            for i in range(WORKERS)
        ]
        for thread in threads:
            thread.start()
        while sum(ledger.acked for ledger in ledgers) < 20:
            time.sleep(0.05)
        acked_before = [ledger.acked for ledger in ledgers]
        taken = arbiter("db", "backup", str(under_load), *storage_args(data, source_database))
        sent_after = [ledger.sent for ledger in ledgers]
        assert taken.returncode == 0, taken.stderr
        assert sum(sent_after) > sum(acked_before), "the fleet reported during the backup"
        stopping.set()
        for thread in threads:
            thread.join(10)
        assert all(not ledger.errors for ledger in ledgers), [ledger.errors for ledger in ledgers]
        task_ids = [ledger.task_id for ledger in ledgers if ledger.task_id is not None]
        assert len(task_ids) == WORKERS
        quiet_taken = arbiter("db", "backup", str(quiet), *storage_args(data, source_database))
        assert quiet_taken.returncode == 0, quiet_taken.stderr
        live = served(server, run_id, task_ids)
    finally:
        stop(server)

    target = tmp_path / "restored"
    restored = arbiter("db", "restore", str(under_load), *storage_args(target, empty_database))
    assert restored.returncode == 0, restored.stderr
    again = start_server(target, empty_database)
    try:
        snapshot = served(again, run_id, task_ids)
    finally:
        stop(again)
    assert "aggregates differed" not in again.output()  # the copy was one moment
    for stats, low, high in zip(snapshot["tasks"], acked_before, sent_after, strict=True):
        assert low <= stats["wins"] <= high
    assert snapshot["results"]["wins"] == sum(stats["wins"] for stats in snapshot["tasks"])

    # Restored over the database it replaces: exactly what the server served.
    restored = arbiter("db", "restore", str(quiet), *storage_args(target, empty_database))
    assert restored.returncode == 0, restored.stderr
    final = start_server(target, empty_database)
    try:
        assert served(final, run_id, task_ids) == live
    finally:
        stop(final)


def test_restore_refuses_while_a_primary_serves_and_a_backup_never_overwrites(
    tmp_path: Path, source_database: str
) -> None:
    data = tmp_path / "data"
    backup_file = tmp_path / "one.backup"
    assert arbiter("db", "upgrade", *storage_args(data, source_database)).returncode == 0
    assert (
        arbiter("db", "backup", str(backup_file), *storage_args(data, source_database)).returncode
        == 0
    )
    again = arbiter("db", "backup", str(backup_file), *storage_args(data, source_database))
    assert (again.returncode, "already exists" in again.stderr) == (1, True)
    server = start_server(data, source_database)
    try:
        refused = arbiter("db", "restore", str(backup_file), *storage_args(data, source_database))
    finally:
        stop(server)
    assert refused.returncode == 2
    assert "a primary is serving this database" in refused.stderr
    not_a_backup = tmp_path / "notes.txt"
    not_a_backup.write_text("hello")
    wrong = arbiter("db", "restore", str(not_a_backup), *storage_args(data, source_database))
    assert wrong.returncode == 1
    assert "is not a" in wrong.stderr


def test_a_backup_is_readable_by_its_owner_alone(
    tmp_path: Path, backend: str, source_database: str
) -> None:
    """It holds password hashes: mode 0600 whatever the umask."""
    data = tmp_path / "data"
    assert arbiter("db", "upgrade", *storage_args(data, source_database)).returncode == 0
    destination = tmp_path / "copy.dump"
    old = os.umask(0o022)
    try:
        done = arbiter("db", "backup", str(destination), *storage_args(data, source_database))
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert destination.stat().st_mode & 0o777 == 0o600
