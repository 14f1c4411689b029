"""`arbiter serve` start-up as an operator meets it, on real processes: one primary
per database (the lease), and every set-up mistake (database unreachable or of
a kind we do not support, port taken, an object store that cannot be used)
refused with one line and exit status 2 before anything is touched; the banner
says which database was opened and whether it was created just now."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from arbiter.storage.engine import normalize_url
from arbiter.storage.lease import ADVISORY_LOCK_KEY
from tests.conftest import postgres_admin_url
from tests.s3_server import S3Bucket
from tests.storage.test_lease import libpq
from tests.storage.test_unavailable import closed_port
from tests.web.live_server import Server, free_port, start_server, stop


def arbiter(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "arbiter", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=dict(os.environ), timeout=60, check=False
    )


def assert_refused_in_one_line(result: subprocess.CompletedProcess[str], says: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("arbiter: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback
    assert says in result.stderr


def serve_args(data_dir: Path, database_url: str = "", port: int | None = None) -> list[str]:
    args = ["serve", "--port", str(port or free_port()), "--data-dir", str(data_dir)]
    return [*args, "--database-url", database_url] if database_url else args


@pytest.fixture
def primary(tmp_path: Path, database_url: str) -> Iterator[Server]:
    running = start_server(tmp_path / "data", database_url, {"ARBITER_LEASE_CHECK_SECONDS": "1"})
    yield running
    stop(running)


def test_a_second_primary_refuses_to_start(
    primary: Server, tmp_path: Path, database_url: str
) -> None:
    result = arbiter(*serve_args(tmp_path / "data", database_url))
    assert_refused_in_one_line(result, "another primary holds")
    assert f"pid {primary.process.pid}" in result.stderr
    assert httpx.get(primary.url + "/api/active_runs").status_code == 200


def test_a_secondary_starts_beside_the_primary(
    primary: Server, tmp_path: Path, database_url: str
) -> None:
    secondary = start_server(tmp_path / "data", database_url, {"ARBITER_ROLE": "secondary"})
    try:
        reply = httpx.post(secondary.url + "/api/request_version", json={})
        assert reply.json() == "/api/request_version: primary instance required"
    finally:
        stop(secondary)


def test_a_primary_that_stopped_leaves_the_lease_free(
    primary: Server, tmp_path: Path, database_url: str
) -> None:
    stop(primary)
    restarted = start_server(tmp_path / "data", database_url)
    stop(restarted)


def test_a_killed_primary_leaves_the_lease_free(
    primary: Server, tmp_path: Path, database_url: str
) -> None:
    primary.process.send_signal(signal.SIGKILL)
    primary.process.wait()
    restarted = start_server(tmp_path / "data", database_url)
    stop(restarted)


def worker_call(server: Server) -> httpx.Response:
    return httpx.post(server.url + "/api/request_version", json={}, timeout=5)


def wait_for_status(server: Server, status: int) -> httpx.Response:
    deadline = time.monotonic() + 15
    while True:
        reply = worker_call(server)
        if reply.status_code == status or time.monotonic() > deadline:
            assert reply.status_code == status, (reply.text, server.output())
            return reply
        time.sleep(0.1)


def wait_for_lock_wait(admin: psycopg.Connection, pid: int) -> None:
    """Until the session `pid` waits for a lock it was not granted."""
    deadline = time.monotonic() + 15
    query = "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted"
    while admin.execute(query, (pid,)).fetchone() != (1,):
        assert time.monotonic() < deadline, "the session never waited for the lock"
        time.sleep(0.01)


def test_a_killed_lease_connection_stops_the_worker_api_until_the_lease_is_back(
    tmp_path: Path, postgres_database_url: str
) -> None:
    server = start_server(
        tmp_path / "data", postgres_database_url, {"ARBITER_LEASE_CHECK_SECONDS": "1"}
    )
    try:
        assert worker_call(server).status_code == 400  # serving: the empty body is wrong
        url = libpq(postgres_database_url)
        with (
            psycopg.connect(url, autocommit=True) as admin,
            psycopg.connect(url, autocommit=True) as rival,
        ):
            # A second primary's session waits for the lock before the kill, so the
            # lock passes to it and the 503 lasts. Taken after the kill, the server's
            # keeper (checking every second) could take it back first.
            lock = "SELECT pg_advisory_lock(%s)"
            waiting = threading.Thread(target=rival.execute, args=(lock, (ADVISORY_LOCK_KEY,)))
            waiting.start()
            wait_for_lock_wait(admin, rival.info.backend_pid)
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name LIKE 'arbiter primary%%' AND datname = current_database()"
            ).fetchall()
            assert killed == [(True,)]
            waiting.join(timeout=15)
            assert not waiting.is_alive()
            reply = wait_for_status(server, 503)
            lost = "/api/request_version: primary lease lost, retry shortly"
            assert reply.json() == lost  # a refusal for now, which workers retry
            assert httpx.get(server.url + "/api/active_runs").status_code == 200
            rival.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
            wait_for_status(server, 400)
        assert "primary lease lost" in server.output()
        assert "primary lease taken again" in server.output()
    finally:
        stop(server)


UNREACHABLE = f"postgresql://postgres@127.0.0.1:{closed_port()}/arbiter"
COMMANDS = {
    "serve": serve_args,
    "users": lambda data_dir, url: ["users", "list", "--database-url", url],
    "db upgrade": lambda data_dir, url: ["db", "upgrade", "--database-url", url],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unreachable_database_is_one_line(command: str, tmp_path: Path) -> None:
    result = arbiter(*COMMANDS[command](tmp_path / "data", UNREACHABLE))
    assert_refused_in_one_line(result, "cannot reach the database postgresql://postgres@")


def test_a_host_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    url = "postgresql://postgres@no-such-host.invalid/arbiter"
    result = arbiter(*serve_args(tmp_path / "data", url))
    assert_refused_in_one_line(result, "cannot reach the database")
    assert "no-such-host.invalid" in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unsupported_url_is_one_line(command: str, tmp_path: Path) -> None:
    result = arbiter(*COMMANDS[command](tmp_path / "data", "mysql://root@localhost/arbiter"))
    assert_refused_in_one_line(result, "unsupported database URL scheme 'mysql'")


def test_a_port_in_use_is_refused_before_anything_is_touched(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = arbiter(*serve_args(tmp_path / "data", port=port))
    assert_refused_in_one_line(result, f"port {port} on 127.0.0.1 is already in use")
    assert not (tmp_path / "data").exists()  # no data dir, no database, no migration


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """ "" (a fresh data dir's SQLite file) or a PostgreSQL database with no schema."""
    if request.param == "sqlite":
        yield ""
        return
    admin = postgres_admin_url()
    if admin is None:
        pytest.skip("PostgreSQL not available (set ARBITER_TEST_POSTGRES_URL)")
    name = f"arbiter_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq(admin), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield make_url(normalize_url(admin)).set(database=name).render_as_string(False)
    with psycopg.connect(libpq(admin), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def banner_database_line(server: Server) -> str:
    return next(line for line in server.output().splitlines() if "database:" in line)


def test_the_banner_says_a_database_was_created_just_now(
    tmp_path: Path, empty_database_url: str
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir, empty_database_url)
    stop(first)
    line = banner_database_line(first)
    assert line.endswith("(created now)")
    if empty_database_url:
        assert "database: PostgreSQL postgresql://postgres@" in line
    else:
        assert f"database: SQLite {data_dir.resolve() / 'arbiter.sqlite3'} " in line
    second = start_server(data_dir, empty_database_url)
    stop(second)
    assert banner_database_line(second).endswith("(existing, 0 runs)")


# ------------------------------------------------------------ an S3-compatible bucket


def arbiter_with(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "arbiter", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, **env}, timeout=60, check=False
    )


def misconfigured(bucket: S3Bucket, how: str, dead_port: int) -> tuple[dict[str, str], str]:
    """ARBITER_FILES_S3_* wrong in one way, and what the refusal says."""
    env = bucket.env()
    if how == "wrong secret":
        env["ARBITER_FILES_S3_SECRET_ACCESS_KEY"] = "not-the-secret"
        return env, "cannot be used: access denied (check the access key and secret)"
    if how == "no such bucket":
        env["ARBITER_FILES_S3_BUCKET"] = "no-such-bucket"
        return env, f"object store: no bucket 'no-such-bucket' at {bucket.server.endpoint}"
    if how == "dead endpoint":
        env["ARBITER_FILES_S3_ENDPOINT"] = f"http://127.0.0.1:{dead_port}"
        return env, f"at http://127.0.0.1:{dead_port} cannot be used: Could not connect"
    if how == "unreadable secret file":
        env.pop("ARBITER_FILES_S3_SECRET_ACCESS_KEY")
        env["ARBITER_FILES_S3_SECRET_ACCESS_KEY_FILE"] = "/nonexistent/s3-secret"
        return env, "cannot read /nonexistent/s3-secret: No such file or directory"
    env.pop("ARBITER_FILES_S3_BUCKET")
    return env, "ARBITER_FILES_S3_ENDPOINT is set but ARBITER_FILES_S3_BUCKET is not"


MISCONFIGURATIONS = [
    "wrong secret",
    "no such bucket",
    "dead endpoint",
    "unreadable secret file",
    "no bucket",
]


@pytest.mark.parametrize("how", MISCONFIGURATIONS)
def test_an_object_store_that_cannot_be_used_is_one_line(
    how: str, tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    env, says = misconfigured(s3_bucket, how, closed_port())
    result = arbiter_with(env, *serve_args(tmp_path / "data"))
    assert_refused_in_one_line(result, says)
    assert "not-the-secret" not in result.stderr


def test_db_upgrade_checks_the_object_store_first(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    env, says = misconfigured(s3_bucket, "wrong secret", closed_port())
    result = arbiter_with(env, "db", "upgrade", "--data-dir", str(tmp_path / "data"))
    assert_refused_in_one_line(result, says)
