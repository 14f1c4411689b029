"""kill -9 a real server under load: every acknowledged update_task survives, once.

Workers post cumulative stats, one game pair more each time, and keep a
client-side ledger: the last stats the server acknowledged and the last ones
sent. After a SIGKILL and a restart, each task must hold exactly what was
acknowledged, or the one update in flight whose reply was lost; and the run's
totals must equal the sum over its tasks (start-up recomputes and checks them).
"""

import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psycopg
import pytest
from sqlalchemy import make_url
from starlette.testclient import TestClient

from arbiter.storage.engine import normalize_url
from arbiter.storage.lease import ADVISORY_LOCK_KEY
from arbiter.web import app as app_module
from arbiter.web.app import create_app
from bench import faults
from tests import fresh_loop
from tests.domain.runs.support import pairs
from tests.storage.support import held_syncs
from tests.web.api_support import (
    api_settings,
    api_with_users,
    approved,
    stored_task,
    take_task,
    users,
    wire,
    worker_body,
)
from tests.web.api_support import worker_info as api_worker_info
from tests.web.live_server import (
    Server,
    create_token,
    create_user,
    start_server,
    stop,
)
from tests.web.support import state

WORKERS = 6
LOAD_SECONDS = 2.5


def worker_info(index: int) -> dict[str, Any]:
    return api_worker_info(
        key=f"w{index:03d}", concurrency=1, max_memory=4000, worker_arch="x86-64"
    )


def stats_after(pairs: int) -> dict[str, Any]:
    """All pairs are one win and one draw: W = D = pairs, pentanomial WD = pairs."""
    return {
        "wins": pairs,
        "losses": 0,
        "draws": pairs,
        "crashes": 0,
        "time_losses": 0,
        "pentanomial": [0, 0, 0, pairs, 0],
    }


@dataclass
class Ledger:
    """What one worker knows: its task, and the pair counts acknowledged and sent."""

    task_id: int | None = None
    acked: int = 0
    sent: int = 0
    errors: list[str] = field(default_factory=list)


def play(
    url: str, token: str, index: int, run_id: str, ledger: Ledger, killed: threading.Event
) -> None:
    """One worker until the server dies. A transport error is expected only once the
    kill was sent; anything else (an error before it, a reply that is not the
    expected JSON) is recorded, and the test fails on it."""
    try:
        with httpx.Client(base_url=url, timeout=30.0) as client:
            post_updates(client, token, worker_info(index), run_id, ledger)
    except httpx.TransportError as error:
        if not killed.is_set():
            ledger.errors.append(f"before the kill: {error!r}")
    except Exception as error:  # the thread reports it; the test fails on it
        ledger.errors.append(repr(error))


def post_updates(
    client: httpx.Client, token: str, info: dict[str, Any], run_id: str, ledger: Ledger
) -> None:
    body = request_task(client, token, info)
    if "task_id" not in body:
        ledger.errors.append(f"no task: {body}")
        return
    ledger.task_id = body["task_id"]
    while True:
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


def request_task(client: httpx.Client, token: str, info: dict[str, Any]) -> dict[str, Any]:
    """Like a real worker: "too busy" (the gate, or this account's share of it, is
    full) means ask again; the six workers are one account, so most wait a turn."""
    deadline = time.monotonic() + 60
    while True:
        reply = client.post("/api/request_task", json={"password": token, "worker_info": info})
        body: dict[str, Any] = reply.json()
        if "too busy" not in body.get("info", "") or time.monotonic() > deadline:
            return body
        time.sleep(0.05)


def wait_until_all_acknowledged(ledgers: list[Ledger], timeout: float = 90.0) -> None:
    """Every worker holds a task and has one update acknowledged (or has failed).

    The kill must not come before that: a worker killed while still waiting for
    its task has nothing to check, and on a slow machine (PostgreSQL commits, one
    account's share of the gate) that wait once outlasted a fixed load time."""
    deadline = time.monotonic() + timeout
    while not all(ledger.acked > 0 or ledger.errors for ledger in ledgers):
        assert time.monotonic() < deadline, ledgers
        time.sleep(0.05)


def wait_until_lease_free(database_url: str, timeout: float = 30.0) -> None:
    """PostgreSQL: the killed server's session (and its advisory lock, the lease)
    ends once its backend sees the closed socket; a restart before that would be
    refused as a second primary."""
    if not database_url:
        return
    query = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    deadline = time.monotonic() + timeout
    with psycopg.connect(libpq_url(database_url), autocommit=True) as connection:
        while connection.execute(query, (ADVISORY_LOCK_KEY,)).fetchone() != (0,):
            assert time.monotonic() < deadline, "the killed primary's lease was never freed"
            time.sleep(0.05)


def submit_run(server: Server, owner: str, approver: str, repo: str) -> str:
    # A very short time control makes tasks long enough to outlast the load.
    body = {
        "tests_repo": repo,
        "new_tag": "patch",
        "base_tag": "master",
        "num_games": 1_000_000,
        "tc": "0.1+0.001",
    }
    headers = {"authorization": f"Bearer {owner}"}
    reply = httpx.post(server.url + "/api/runs", json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    run_id: str = reply.json()["run_id"]
    approve = httpx.post(
        f"{server.url}/api/runs/{run_id}/approve", headers={"authorization": f"Bearer {approver}"}
    )
    assert approve.status_code == 200, approve.text
    return run_id


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_acknowledged_updates_survive_kill_9(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest, repo_url: str
) -> None:
    database_url = ""
    if backend == "postgresql":
        database_url = request.getfixturevalue("postgres_database_url")
    data = tmp_path / "data"
    data.mkdir()
    create_user(data, "alice", database_url)
    create_user(data, "root", database_url, approver=True)
    alice, root = (
        create_token(data, "alice", database_url),
        create_token(data, "root", database_url),
    )
    server = start_server(data, database_url)
    try:
        run_id = submit_run(server, alice, root, repo_url)
        ledgers = [Ledger() for _ in range(WORKERS)]
        killed = threading.Event()
        threads = [
            threading.Thread(target=play, args=(server.url, alice, i, run_id, ledgers[i], killed))
            for i in range(WORKERS)
        ]
        for thread in threads:
            thread.start()
        wait_until_all_acknowledged(ledgers)
        time.sleep(LOAD_SECONDS)  # updates under way from every worker
        killed.set()
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive()
    finally:
        stop(server)
    assert all(not ledger.errors for ledger in ledgers), [ledger.errors for ledger in ledgers]
    assert all(ledger.acked > 0 for ledger in ledgers), ledgers
    wait_until_lease_free(database_url)

    restarted = start_server(data, database_url)
    try:
        tasks = []
        for ledger in ledgers:
            assert ledger.task_id is not None  # every handed-out task exists after restart
            reply = httpx.get(f"{restarted.url}/api/get_task/{run_id}/{ledger.task_id}")
            assert reply.status_code == 200, reply.text
            stored = reply.json()["stats"]["wins"]
            assert ledger.acked <= stored <= ledger.sent
            tasks.append(reply.json()["stats"])
        run = httpx.get(f"{restarted.url}/api/get_run/{run_id}").json()
        assert run["results"]["wins"] == sum(task["wins"] for task in tasks)
        assert run["results"]["pentanomial"][3] == sum(task["pentanomial"][3] for task in tasks)
    finally:
        stop(restarted)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_kill_9_loop_under_a_fleet_loses_and_doubles_nothing(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """bench/faults.py's kill loop, short: a simulated fleet (request_task, beats,
    failed tasks, disconnects) plays through 3 kills and restarts on the same port;
    the ledger of acknowledged results must then equal the server's totals."""
    args = ["kill", "--cycles", "3", "--workers", "60", "--speedup", "30", "--ramp", "2"]
    args += ["--runs", "2", "--users", "2", "--no-pin"]
    if backend == "postgresql":
        args += ["--database-url", request.getfixturevalue("postgres_database_url")]
    lines, failed = fresh_loop.run(faults.kill_loop(faults.parse_args(args)))
    assert failed == [], lines
    assert "equal the ledger exactly" in "\n".join(lines)


# ------------------------------------------------- nothing acknowledged before it is durable


def live_task(client: TestClient, repo_url: str) -> tuple[str, int]:
    run_id = approved(client, repo_url)
    return run_id, int(take_task(client)["task_id"])


def update(client: TestClient, run_id: str, task_id: int) -> httpx.Response:
    body = worker_body(run_id=run_id, task_id=task_id, stats=wire(pairs(ww=1)))
    return client.post("/api/update_task", json=body)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_update_task_is_answered_only_once_its_commit_is_synced(
    tmp_path: Path,
    sqlite_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    repo_url: str,
) -> None:
    """SQLite: the update is in the WAL (a killed process keeps it) before the
    disk has it; the worker must not hear "saved" until the WAL's fdatasync ends."""
    with api_with_users(tmp_path, sqlite_database_url, monkeypatch) as client:
        run_id, task_id = live_task(client, repo_url)
        with ThreadPoolExecutor(max_workers=1) as pool, held_syncs(monkeypatch) as held:
            reply = pool.submit(update, client, run_id, task_id)
            committed = lambda: stored_task(client, run_id, task_id).wins == 2  # noqa: E731
            wait_for(committed, "the update was never committed")
            time.sleep(0.3)
            assert not reply.done(), "update_task answered before its WAL was synced"
            assert held.waiting() >= 1
            held.released.set()
            assert reply.result(timeout=10).json()["task_alive"] is True


def libpq_url(database_url: str) -> str:
    return (
        make_url(normalize_url(database_url)).set(drivername="postgresql").render_as_string(False)
    )


HOLD_COMMIT = 2121  # the advisory lock a test trigger waits for at commit


def add_commit_trigger(database_url: str, body: str) -> None:
    """A deferred trigger on tasks: it runs inside COMMIT, so `body` decides
    whether and when an update_task's commit returns."""
    with psycopg.connect(libpq_url(database_url), autocommit=True) as connection:
        connection.execute(
            "CREATE FUNCTION at_commit() RETURNS trigger LANGUAGE plpgsql"
            f" AS $$ BEGIN {body}; RETURN NULL; END $$"
        )
        connection.execute(
            "CREATE CONSTRAINT TRIGGER at_commit AFTER UPDATE ON tasks"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION at_commit()"
        )


def test_update_task_is_answered_only_once_postgresql_commit_returns(
    tmp_path: Path,
    postgres_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    repo_url: str,
) -> None:
    """PostgreSQL's COMMIT returns once the commit is flushed (synchronous_commit
    on): the reply must wait for that COMMIT, held here by a trigger inside it."""
    with api_with_users(tmp_path, postgres_database_url, monkeypatch) as client:
        with state(client).storage.read() as tx:
            assert tx.connection.exec_driver_sql("SHOW synchronous_commit").scalar() == "on"
        run_id, task_id = live_task(client, repo_url)
        add_commit_trigger(postgres_database_url, f"PERFORM pg_advisory_xact_lock({HOLD_COMMIT})")
        with (
            psycopg.connect(libpq_url(postgres_database_url), autocommit=True) as holder,
            ThreadPoolExecutor(max_workers=1) as pool,
        ):
            holder.execute("SELECT pg_advisory_lock(%s)", (HOLD_COMMIT,))
            reply = pool.submit(update, client, run_id, task_id)
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            wait_for(
                lambda: holder.execute(waiting).fetchone() == (1,),
                "the commit never reached the trigger",
            )
            time.sleep(0.3)
            assert not reply.done(), "update_task answered before its COMMIT returned"
            assert stored_task(client, run_id, task_id).wins == 0
            holder.execute("SELECT pg_advisory_unlock(%s)", (HOLD_COMMIT,))
            assert reply.result(timeout=10).json()["task_alive"] is True
        assert stored_task(client, run_id, task_id).wins == 2


def test_an_update_whose_postgresql_commit_fails_is_not_acknowledged(
    tmp_path: Path,
    postgres_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    repo_url: str,
) -> None:
    monkeypatch.setattr(app_module, "DRAIN_SECONDS", 0.0)
    app = create_app(api_settings(tmp_path, postgres_database_url))
    with TestClient(app, base_url="http://testserver", raise_server_exceptions=False) as client:
        users(client)
        run_id, task_id = live_task(client, repo_url)
        add_commit_trigger(postgres_database_url, "RAISE EXCEPTION 'commit refused'")
        reply = update(client, run_id, task_id)
        assert reply.status_code == 500, reply.text
        assert "task_alive" not in reply.json()
        assert stored_task(client, run_id, task_id).wins == 0
        task = client.get(f"/api/get_task/{run_id}/{task_id}").json()
        assert task["stats"]["wins"] == 0  # memory did not keep what storage refused
