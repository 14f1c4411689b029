"""A real `arbiter serve` process (uvicorn, httptools, uvloop) on a real socket."""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from arbiter.storage.engine import normalize_url
from tests.web.live_server import (
    PASSWORD,
    Server,
    create_user,
    free_port,
    start_server,
    stop,
)


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
        page = client.get("/signup").text
        marker = 'name="csrf_token" value="'
        start = page.index(marker) + len(marker)
        csrf = page[start : page.index('"', start)]
        number = 0
        while not stop_flag.is_set():
            name = f"user{number}"
            form = {
                "username": name,
                "email": f"{name}@example.org",
                "password": PASSWORD,
                "password2": PASSWORD,
                "tests_repo": "",
                "csrf_token": csrf,
            }
            try:
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
    many_signups = {"ARBITER_SIGNUPS_PER_ADDRESS_PER_HOUR": "100000"}
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
