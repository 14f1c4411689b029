"""A real `arbiter serve` process (uvicorn, httptools, uvloop) on a real socket."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from arbiter.commands import serve
from arbiter.runtime.settings import Settings
from arbiter.storage.engine import normalize_url
from tests.web.api_support import worker_info as api_worker_info
from tests.web.live_server import (
    PASSWORD,
    Server,
    create_token,
    create_user,
    free_port,
    start_server,
    stop,
)
from tests.web.support import csrf_in, solved_proof
from tests.web.test_crash_safety import submit_run


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path / "data")
    yield running
    stop(running)


def test_banner_says_where_to_go_and_how_to_log_in(server: Server) -> None:
    output = server.output()
    assert f"open:     {server.url}/" in output
    assert "arbiter users create NAME --approver --password-stdin" in output


def test_request_version_over_a_real_socket(server: Server, tmp_path: Path) -> None:
    create_user(tmp_path / "data", "alice")
    body = {"password": PASSWORD, "worker_info": {"username": "alice"}}
    reply = httpx.post(server.url + "/api/request_version", json=body)
    assert reply.status_code == 200
    assert reply.json()["version"] == 325
    assert reply.json()["duration"] >= 0


def read_reply(connection: socket.socket) -> str:
    """Headers and body of one response: they may arrive in separate packets."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(4096)
    return (head + b"\r\n\r\n" + body).decode()


def test_oversized_body_is_refused_before_it_is_sent(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(
            b"POST /api/request_version HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 104857600\r\n\r\n"
        )
        reply = read_reply(connection)
    assert reply.startswith("HTTP/1.1 413")
    assert '"error":"/api/request_version: request body larger than' in reply


def test_sigusr1_dumps_thread_stacks(server: Server) -> None:
    server.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while "most recent call first" not in server.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "most recent call first" in server.output()
    assert httpx.get(server.url + "/tests").status_code == 200


def test_multi_process_primary_refuses_to_start(tmp_path: Path) -> None:
    args = [
        sys.executable,
        "-m",
        "arbiter",
        "serve",
        "--port",
        str(free_port()),
        "--data-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "WEB_CONCURRENCY": "4"}
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30, check=False)
    assert result.returncode == 2
    assert "must run as one process" in result.stderr


def signup_until_killed(url: str, acknowledged: list[str], stop_flag: threading.Event) -> None:
    """Sign up accounts one after another; record each one the server confirmed."""
    with httpx.Client(base_url=url, timeout=10) as client:
        number = 0
        while not stop_flag.is_set():
            name = f"user{number}"
            try:
                page = client.get("/signup").text  # each signup solves a challenge of its own
                form = {
                    "username": name,
                    "email": f"{name}@example.org",
                    "password": PASSWORD,
                    "password2": PASSWORD,
                    "tests_repo": "",
                    "csrf_token": csrf_in(page),
                    "altcha": solved_proof(page),
                }
                reply = client.post("/signup", data=form)
            except httpx.TransportError:
                return
            if reply.status_code == 303:
                acknowledged.append(name)
            number += 1


def test_kill_9_during_account_writes_loses_no_committed_row(
    tmp_path: Path, database_url: str
) -> None:
    data_dir = tmp_path / "data"
    # Every signup comes from one address: lift the per-address limit (5 an hour).
    many_signups = {
        "ARBITER_SIGNUPS_PER_ADDRESS_PER_HOUR": "100000",
        "ARBITER_SIGNUP_PROOF_OF_WORK": "1000",
    }
    server = start_server(data_dir, database_url, many_signups)
    acknowledged: list[str] = []
    stop_flag = threading.Event()
    writers = [
        threading.Thread(target=signup_until_killed, args=(server.url, acknowledged, stop_flag))
    ]
    for writer in writers:
        writer.start()
    try:
        deadline = time.monotonic() + 20
        while len(acknowledged) < 15 and time.monotonic() < deadline:
            time.sleep(0.02)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
    finally:
        stop_flag.set()
        for writer in writers:
            writer.join()
    assert len(acknowledged) >= 15, server.output()
    stored = stored_usernames(database_url)
    assert set(acknowledged) <= stored
    restarted = start_server(data_dir, database_url)
    stop(restarted)


def stored_usernames(database_url: str) -> set[str]:
    url = normalize_url(database_url)
    if make_url(url).get_backend_name() == "sqlite":
        path = make_url(url).database
        assert path is not None
        connection = sqlite3.connect(path)
        try:
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            return {row[0] for row in connection.execute("SELECT username FROM users")}
        finally:
            connection.close()
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {row[0] for row in connection.execute(text("SELECT username FROM users"))}
    finally:
        engine.dispose()


# ------------------------------------------- the default settings, in a real server


def test_the_default_threadpool_size_is_the_one_the_server_runs_with(server: Server) -> None:
    """No ARBITER_* setting in the environment: the limiter the running server's
    handlers go through has the seeds' 200 threads (read back after start-up)."""
    assert "threadpool of 200 threads" in server.output()


def locked_database(data_dir: Path) -> sqlite3.Connection:
    """Holds SQLite's write lock from another process's point of view: the
    server's next commit waits (its busy timeout is 30 s) until rollback."""
    holder = sqlite3.connect(data_dir / "arbiter.sqlite3", isolation_level=None, timeout=30)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_the_default_task_gate_is_five_places_two_per_account(
    tmp_path: Path, repo_url: str
) -> None:
    """request_task's gate with its defaults, over HTTP: while a decision cannot
    commit, five calls wait inside the gate (two per account at most), and a sixth
    call, within its account's share, is told "too busy" at once."""
    data = tmp_path / "data"
    data.mkdir()
    for name in ("alice", "bob"):
        create_user(data, name)
    create_user(data, "root", approver=True)
    tokens = {name: create_token(data, name) for name in ("alice", "bob", "root")}
    running = start_server(data)
    try:
        submit_run(running, tokens["alice"], tokens["root"], repo_url)
        for name, token in tokens.items():  # credentials proven: no query left to block on
            body = {"password": token, "worker_info": {"username": name}}
            assert httpx.post(running.url + "/api/request_version", json=body).status_code == 200

        def request_task(name: str, key: str) -> dict[str, Any]:
            info = api_worker_info(name, key=key)
            body = {"password": tokens[name], "worker_info": info}
            reply = httpx.post(running.url + "/api/request_task", json=body, timeout=60)
            payload: dict[str, Any] = reply.json()
            return payload

        holder = locked_database(data)
        with ThreadPoolExecutor(max_workers=6) as pool:
            try:
                inside = [
                    pool.submit(request_task, name, f"{name[:3]}{i}")
                    for name in ("alice", "bob", "root")
                    for i in range(2 if name != "root" else 1)
                ]
                time.sleep(2.0)  # each call is in the gate within milliseconds
                sixth = pool.submit(request_task, "root", "roo1").result(timeout=20)
                assert "too busy" in sixth.get("info", ""), sixth
                assert not any(call.done() for call in inside)
            finally:
                holder.rollback()
                holder.close()
            replies = [call.result(timeout=60) for call in inside]
        assert all("task_id" in reply for reply in replies), replies
    finally:
        stop(running)


def test_the_banner_names_an_arbiter_command_that_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """After `bash scripts/serve` the shell finds no bare `arbiter`: the banner
    names the script beside the interpreter instead."""
    monkeypatch.setattr(serve.shutil, "which", lambda _name: None)
    command = serve.arbiter_command()
    assert command.endswith("arbiter")
    done = subprocess.run([command, "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr(serve.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert serve.arbiter_command() == "arbiter"


def test_with_json_logs_the_banner_is_one_json_line_too() -> None:
    settings = Settings(log_format="json")
    line = serve.banner_output(settings, serve.banner(settings, "SQLite, created"))
    document = json.loads(line)
    assert (document["level"], document["logger"]) == ("info", "arbiter.serve")
    assert "users create NAME --approver" in document["message"]
    assert "\n" not in line
    text = Settings()
    assert serve.banner_output(text, "banner") == "banner"
