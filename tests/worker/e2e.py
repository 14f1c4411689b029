"""Helpers of the end-to-end tests: a real server, real worker processes."""

import gzip
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chess.pgn
import httpx2 as httpx

from arbiter.protocol.books import SHIPPED_BOOK
from tests.web.live_server import CHEAP_HASHING, Server, free_port, stop, wait_until_serving

# Starts `arbiter serve` with a short task lease and a fast scavenger, so a
# killed worker's task comes back in seconds instead of minutes. The server
# reads both as module constants; see the report for the settings we asked for.
PATCHED_SERVE = (
    "import sys\n"
    "import arbiter.domain.runs.registry as registry\n"
    "import arbiter.jobs.table as table\n"
    "registry.LEASE_SECONDS = float(sys.argv[1])\n"
    "table.MINUTE = table.RECLAIM_CHECK_SECONDS = float(sys.argv[2])\n"
    "from arbiter.cli import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)


@dataclass(frozen=True)
class Accounts:
    data: Path  # a data directory holding the accounts, copied for each server
    alice: str  # worker token of the submitter
    root: str  # token of an approver


@dataclass
class Worker:
    process: subprocess.Popen[str]
    data_dir: Path
    output: Path

    def log(self) -> str:
        text = self.output.read_text()
        worker_log = self.data_dir / "worker.log"
        return text + (worker_log.read_text() if worker_log.exists() else "")

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            message = f"the worker did not finish in {timeout} s:\n{self.log()}"
            raise AssertionError(message) from None

    def signal(self, number: signal.Signals) -> None:
        self.process.send_signal(number)


@dataclass
class Arena:
    """A server of its own for one test, and the workers the test starts
    (killed, if still running, when the test ends)."""

    server: Server
    accounts: Accounts
    directory: Path
    workers: list[Worker] = field(default_factory=list)

    def submit(self, repo_url: str, **args: Any) -> str:
        body = {
            "tests_repo": repo_url,
            "base_tag": "master",
            "new_tag": "stronger",
            "book": SHIPPED_BOOK,  # hosted by the server; catalogue books need the internet
            **args,
        }
        url = self.server.url
        headers = _bearer(self.accounts.alice)
        reply = httpx.post(f"{url}/api/runs", json=body, headers=headers, timeout=30)
        assert reply.status_code == 200, reply.text
        run_id: str = reply.json()["run_id"]
        approve = httpx.post(
            f"{url}/api/runs/{run_id}/approve", headers=_bearer(self.accounts.root)
        )
        assert approve.status_code == 200, approve.text
        return run_id

    def worker(self, name: str, *extra: str) -> Worker:
        data_dir = self.directory / name
        output = self.directory / f"{name}.out"
        command = [
            sys.executable, "-m", "arbiter", "worker",
            "--server", self.server.url,
            "--username", "alice",
            "--token", self.accounts.alice,
            "--data-dir", str(data_dir),
            "--uuid-prefix", name,
            "--concurrency", "1",
            *extra,
        ]  # fmt: skip
        with output.open("w") as sink:
            env = {**os.environ, "ARBITER_WORKER_GIT_ALLOW": "file"}  # the sample repository
            process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env
            )
        started = Worker(process, data_dir, output)
        self.workers.append(started)
        return started


@contextmanager
def arena(accounts: Accounts, directory: Path, *, lease: float | None = None) -> Iterator[Arena]:
    data = directory / "server"
    shutil.copytree(accounts.data, data)
    port = free_port()
    serve = ["serve", "--port", str(port), "--data-dir", str(data)]
    if lease is None:
        command = [sys.executable, "-m", "arbiter", *serve]
    else:
        command = [sys.executable, "-c", PATCHED_SERVE, str(lease), "1.0", *serve]
    log = directory / "server.log"
    env = {**os.environ, **CHEAP_HASHING, "ARBITER_GIT_ALLOW": "file"}
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env
        )
    server = Server(process, f"http://127.0.0.1:{port}", log)
    place = Arena(server, accounts, directory)
    try:
        wait_until_serving(server)
        yield place
    finally:
        for worker in place.workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
        stop(server)


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def get_run(server: Server, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = httpx.get(f"{server.url}/api/get_run/{run_id}").json()
    return run


def get_task(server: Server, run_id: str, task_id: int) -> dict[str, Any] | None:
    reply = httpx.get(f"{server.url}/api/get_task/{run_id}/{task_id}")
    if reply.status_code != 200:
        return None
    task: dict[str, Any] = reply.json()
    return task


def tasks(server: Server, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while (task := get_task(server, run_id, len(found))) is not None:
        found.append(task)
    return found


def actions(server: Server, run_id: str, action: str) -> list[dict[str, Any]]:
    reply = httpx.post(f"{server.url}/api/actions", json={"action": action, "run_id": run_id})
    assert reply.status_code == 200, reply.text
    found: list[dict[str, Any]] = reply.json()
    return found


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def games(stats: dict[str, Any]) -> int:
    return int(stats["wins"] + stats["losses"] + stats["draws"])


def run_pgn_games(server: Server, run_id: str) -> list[chess.pgn.Game]:
    reply = httpx.get(f"{server.url}/api/run_pgns/{run_id}.pgn.gz")
    assert reply.status_code == 200, reply.text
    text = gzip.decompress(reply.content).decode()
    stream = io.StringIO(text)
    parsed = []
    while (game := chess.pgn.read_game(stream)) is not None:
        assert not game.errors, game.errors
        parsed.append(game)
    return parsed
