"""kill -9 a real server under load: every acknowledged update_task survives, once.

Workers post cumulative stats, one game pair more each time, and keep a
client-side ledger: the last stats the server acknowledged and the last ones
sent. After a SIGKILL and a restart, each task must hold exactly what was
acknowledged, or the one update in flight whose reply was lost; and the run's
totals must equal the sum over its tasks (start-up recomputes and checks them).
"""

import asyncio
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from bench import faults
from tests.web.api_support import worker_info as api_worker_info
from tests.web.live_server import (
    Server,
    create_token,
    create_user,
    start_server,
    stop,
)

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


def play(url: str, token: str, index: int, run_id: str, ledger: Ledger) -> None:
    info = worker_info(index)
    with httpx.Client(base_url=url, timeout=5.0) as client:
        try:
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
        except (httpx.TransportError, ValueError):
            return  # the server died under us: expected


def request_task(client: httpx.Client, token: str, info: dict[str, Any]) -> dict[str, Any]:
    """Like a real worker: "too busy" (the admission gate is full) means ask again."""
    for _ in range(50):
        reply = client.post("/api/request_task", json={"password": token, "worker_info": info})
        body: dict[str, Any] = reply.json()
        if "too busy" not in body.get("info", ""):
            return body
        time.sleep(0.05)
    return body


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
        threads = [
            threading.Thread(target=play, args=(server.url, alice, i, run_id, ledgers[i]))
            for i in range(WORKERS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(LOAD_SECONDS)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        for thread in threads:
            thread.join(10)
    finally:
        stop(server)
    assert all(not ledger.errors for ledger in ledgers), [ledger.errors for ledger in ledgers]
    assert sum(ledger.acked for ledger in ledgers) > 0

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
    lines, failed = asyncio.run(faults.kill_loop(faults.parse_args(args)))
    assert failed == [], lines
    assert "equal the ledger exactly" in "\n".join(lines)
