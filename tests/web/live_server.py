"""A real `arbiter serve` process on a real socket, for tests that need uvicorn."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

from arbiter.domain.accounts import Accounts
from arbiter.runtime.bootstrap import make_accounts, open_storage
from arbiter.runtime.settings import Settings

PASSWORD = "correct horse battery staple 1729"
CHEAP_HASHING = {
    "ARBITER_ARGON2_TIME_COST": "1",
    "ARBITER_ARGON2_MEMORY_KIB": "8",
    # a real proof of work at signup, a tenth of the default: the browser's share
    # of a loaded CI machine stays small
    "ARBITER_SIGNUP_PROOF_OF_WORK": "100000",
}
# Test repositories are local (file://, loopback): the URL policy lets them through.
LOCAL_GIT = {"ARBITER_GIT_ALLOW": "file, 127.0.0.0/8"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text()

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


def start_server(
    data_dir: Path,
    database_url: str = "",
    extra_env: dict[str, str] | None = None,
    *,
    port: int | None = None,
    cpus: str = "",
    ready: str = "/api/active_runs",
) -> Server:
    """`cpus` pins the process (taskset list, e.g. "0"); `port` reuses a port (restarts);
    started once `ready` answers 200 (a standby's: /healthz)."""
    port = port or free_port()
    env = {**os.environ, **CHEAP_HASHING, **LOCAL_GIT, **(extra_env or {})}
    pin = ["taskset", "-c", cpus] if cpus else []
    args = [
        *pin,
        sys.executable,
        "-m",
        "arbiter",
        "serve",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
    ]
    if database_url:
        args += ["--database-url", database_url]
    log = data_dir.parent / f"server-{port}.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        process = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env)
    server = Server(process, f"http://127.0.0.1:{port}", log)
    try:
        wait_until_serving(server, path=ready)
    except BaseException:
        stop(server)
        raise
    return server


def wait_until_serving(
    server: Server, timeout: float = 30.0, path: str = "/api/active_runs"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited early:\n{server.output()}")
        try:
            if httpx.get(server.url + path, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # not serving yet (no answer, or not a 200): ask again soon
    raise AssertionError(f"server did not start:\n{server.output()}")


def stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@contextmanager
def accounts_of(data_dir: Path, database_url: str = "") -> Iterator[Accounts]:
    """The accounts of a server's database, as `arbiter users` opens them (its
    empty database migrated), in this process: the tests that run the command
    itself are in tests/test_cli.py; here a Python start-up a call is saved."""
    settings = Settings(
        data_dir=data_dir,
        database_url=database_url,
        argon2_time_cost=int(CHEAP_HASHING["ARBITER_ARGON2_TIME_COST"]),
        argon2_memory_kib=int(CHEAP_HASHING["ARBITER_ARGON2_MEMORY_KIB"]),
    )
    with open_storage(settings) as storage:
        yield make_accounts(storage, settings)


def create_user(
    data_dir: Path, name: str, database_url: str = "", *, approver: bool = False
) -> None:
    with accounts_of(data_dir, database_url) as accounts:
        accounts.create_user(name, PASSWORD, approver=approver)


def create_token(data_dir: Path, name: str, database_url: str = "") -> str:
    with accounts_of(data_dir, database_url) as accounts:
        return accounts.create_token(name)
