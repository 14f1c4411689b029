"""A standby (`arbiter serve --role standby`) beside a primary on PostgreSQL:
it serves only its health while the primary lives, and becomes the primary,
live runs restored, once the primary is killed or frozen; a frozen primary
that wakes writes nothing. On SQLite a standby is refused."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2 as httpx

from arbiter.protocol.messages import Stats
from arbiter.web.standby import HolderWatch
from bench.lib import harness
from tests.domain.runs.support import pairs
from tests.web.api_support import wire, worker_body
from tests.web.live_server import Server, free_port, start_server, stop

BATCH = 16  # pairs: the SPRT batch of bench/lib/harness.py's runs
HANG_GUARD = 60.0  # seconds; the takeover itself takes about two (bench/faults.py)


def start_standby(
    data_dir: Path, database_url: str, extra_env: dict[str, str] | None = None
) -> Server:
    role = {"ARBITER_ROLE": "standby", **(extra_env or {})}
    return start_server(data_dir, database_url, role, ready="/healthz")


def answers(server: Server, path: str) -> int | None:
    try:
        return httpx.get(server.url + path, timeout=2.0).status_code
    except httpx.TransportError:
        return None


def wait_for(done: Callable[[], bool], server: Server, what: str) -> float:
    """Seconds until `done()`; fails past the hang guard or if the process exits."""
    started = time.monotonic()
    while not done():
        assert server.process.poll() is None, f"{what}: exited\n{server.output()}"
        assert time.monotonic() - started < HANG_GUARD, f"{what}: not yet\n{server.output()}"
        time.sleep(0.1)
    return time.monotonic() - started


def test_a_standby_waits_on_its_health_then_takes_over_a_killed_primary(
    tmp_path: Path, postgres_database_url: str
) -> None:
    url = postgres_database_url
    accounts = harness.create_accounts(tmp_path / "primary", url, 1)
    primary = start_server(tmp_path / "primary", url)
    standby = start_standby(tmp_path / "standby", url)
    try:
        repo = harness.make_repo(tmp_path / "repo")
        (run_id,) = harness.submit_runs(primary.url, accounts, repo, 1)
        health = httpx.get(standby.url + "/healthz").json()
        assert health == {"status": "alive", "role": "standby"}
        ready = httpx.get(standby.url + "/readyz")
        assert (ready.status_code, ready.json()["role"]) == (503, "standby")
        body = {"password": accounts.workers[0][1], "worker_info": {"username": "fleet0"}}
        refused = httpx.post(standby.url + "/api/request_version", json=body)
        assert refused.status_code == 503
        assert refused.headers["retry-after"]
        assert "standby" in json.dumps(refused.json())
        assert httpx.get(standby.url + "/api/active_runs").status_code == 503  # serves nothing

        primary.process.kill()
        primary.process.wait()
        took = wait_for(lambda: answers(standby, "/readyz") == 200, standby, "the takeover")
        print(f"standby ready {took:.2f} s after the primary was killed")
        runs = httpx.get(standby.url + "/api/active_runs").json()
        assert run_id in runs  # the live runs restored
        assert "standby: the primary's lease is ours" in standby.output()
    finally:
        stop(standby)
        stop(primary)


def test_a_standby_on_sqlite_is_refused_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "ARBITER_ROLE": "standby"}
    args = [sys.executable, "-m", "arbiter", "serve", "--port", str(free_port())]
    args += ["--data-dir", str(tmp_path)]
    done = subprocess.run(args, check=False, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "arbiter: a standby needs PostgreSQL (--database-url postgresql://...): on SQLite the "
        "primary's machine holds the database, and restarting the primary is its failover"
    )


def test_a_frozen_primary_is_taken_over_and_writes_nothing_when_it_wakes(
    tmp_path: Path, postgres_database_url: str
) -> None:
    """SIGSTOP keeps a primary's database sessions, and so its lease, but stops
    its beat: the standby ends its sessions once the beat is 3 checks old and
    takes over. Woken by SIGCONT, the old primary's writes are fenced off: its
    update is not acknowledged and changes nothing, and the new primary's
    totals are exactly what was acknowledged."""
    url = postgres_database_url
    fast = {"ARBITER_LEASE_CHECK_SECONDS": "1"}  # beat every second: frozen after 3
    accounts = harness.create_accounts(tmp_path / "primary", url, 1)
    name, token = accounts.workers[0]
    primary = start_server(tmp_path / "primary", url, extra_env=fast)
    standby = start_standby(tmp_path / "standby", url, extra_env=fast)
    try:
        repo = harness.make_repo(tmp_path / "repo")
        (run_id,) = harness.submit_runs(primary.url, accounts, repo, 1)
        body = worker_body(name, password=token)
        task = httpx.post(primary.url + "/api/request_task", json=body).json()
        assert task["run"]["_id"] == run_id, task
        at = {"run_id": run_id, "task_id": task["task_id"]}

        def update(server: Server, stats: Stats) -> httpx.Response:
            sent = {**body, **at, "stats": wire(stats)}
            return httpx.post(server.url + "/api/update_task", json=sent, timeout=30.0)

        first = update(primary, pairs(ww=BATCH)).json()
        assert first["task_alive"] is True, first  # acknowledged

        os.kill(primary.process.pid, signal.SIGSTOP)
        try:
            took = wait_for(lambda: answers(standby, "/readyz") == 200, standby, "takeover")
            print(f"standby ready {took:.2f} s after the primary was frozen")
            assert update(standby, pairs(ww=2 * BATCH)).json()["task_alive"] is True
        finally:
            os.kill(primary.process.pid, signal.SIGCONT)
        stale = update(primary, pairs(ww=3 * BATCH))  # its memory: one batch
        assert stale.status_code == 503, stale.text
        assert "ended its" in standby.output()
        results = httpx.get(f"{standby.url}/api/get_run/{run_id}").json()["results"]
        assert results["pentanomial"] == [0, 0, 0, 0, 2 * BATCH]  # what was acknowledged, once
    finally:
        stop(standby)
        stop(primary)


def test_a_primarys_beat_expires_after_it_stops_changing() -> None:
    now = [0.0]
    watch = HolderWatch(15.0, clock=lambda: now[0])
    mark = {"token": "t", "since": 1.0, "beat": 1}
    assert not watch.expired(mark)
    now[0] = 14.9
    assert not watch.expired(mark)
    now[0] = 15.0
    assert watch.expired(mark)  # no new beat for 15 s
    assert not watch.expired({**mark, "beat": 2})  # a new beat starts the count again
    now[0] = 40.0
    assert not watch.expired(None)  # unread: says nothing
    assert not watch.expired({"token": "t", "since": 1.0})  # a primary that does not beat
    now[0] = 100.0
    assert not watch.expired({"token": "t", "since": 1.0})  # ... is never taken over
