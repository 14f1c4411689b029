"""`arbiter demo`: the whole system on one machine, for a newcomer.

Starts a server on a fresh SQLite database, creates a demo account and an
approver, makes the sample engine repository (two branches around Debian's
Stockfish, one stronger), submits and approves a short SPRT, runs a worker
until the test is decided, and leaves the server up so the result can be
looked at in a browser. Everything runs as real processes (`python -m
arbiter ...`), exactly as a person would start them. SIGTERM stops it as
Ctrl-C does: the worker and the server are stopped, and with --exit a
temporary directory of its own is removed.
"""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import httpx2 as httpx

from arbiter.protocol.books import SHIPPED_BOOK
from arbiter.worker.arguments import TOKEN_VARIABLE
from arbiter.worker.gitsource import ALLOW_VARIABLE
from arbiter.worker.sample_engine import BASE_NODES, make_sample_repo, usable_stockfish

ARBITER = (sys.executable, "-m", "arbiter")
START_SECONDS = 60.0
# Wide bounds: decided within a minute. At fixed nodes the games are priced so
# short that the automatic batch would be thousands of pairs: report every 8.
SPRT = {"elo0": 0.0, "elo1": 50.0, "batch_size": 8}
# Fixed nodes, as the sample engine plays anyway: no clock, so no speed floor, and
# a slow or loaded machine plays the same games, only later.
TC = f"N={BASE_NODES}"
STOP_SECONDS = 15.0  # a child asked to stop gets this long before it is killed

# The demo's engine is a local repository (file://), which neither the server's
# nor the worker's policy lets through unless told to: the demo's own processes are.
LOCAL_REPOSITORY = {"ARBITER_GIT_ALLOW": "file"}


def run_demo(*, port: int | None, directory: str | None, exit_when_done: bool) -> int:
    real = usable_stockfish("demo")
    if real is None:
        return 1
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="arbiter-demo-"))
    root = root.absolute()
    removing = directory is None and exit_when_done
    signal.signal(signal.SIGTERM, _interrupt)  # stopped as Ctrl-C stops it
    try:
        root.mkdir(parents=True, exist_ok=True)
        _say(f"Demo files in {root}")
        _demo(root, real, port, exit_when_done)
    except KeyboardInterrupt:
        pass
    except SystemExit:
        removing = False  # a failure's message points at the logs in there
        raise
    finally:
        if removing:
            shutil.rmtree(root, ignore_errors=True)
            _say(f"Removed {root}")
    return 0


def _interrupt(_number: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _demo(root: Path, real: str, port: int | None, exit_when_done: bool) -> None:
    data = root / "server"
    demo, approver = _account(data, "demo"), _account(data, "approver", approver=True)
    server, url = _start_server(data, port or _free_port(), root / "server.log")
    try:
        _say(f"Accounts (log in at {url}/login):")
        _say(f"  demo      password {demo[0]}")
        _say(f"  approver  password {approver[0]}  (an approver)")
        repo = make_sample_repo(root / "engine-repo", real)
        _say(f"Sample engine repository: {repo.url} ({repo.base_branch} vs {repo.new_branch})")
        run_id = _submit(url, demo[1], approver[1], repo.url)
        _say(f"SPRT {SPRT} at {TC}, submitted by 'demo' and approved by 'approver'.")
        _say(f"Watch it at  {url}/tests/view/{run_id}")
        _say("Starting a worker (its log: worker/worker.log); it exits when the test is done.\n")
        _run_worker(url, demo[1], root / "worker")
        _summary(url, run_id)
        if not exit_when_done:
            _say(f"\nThe server keeps running at {url}/tests/view/{run_id} ; Ctrl-C to stop it.")
            server.wait()
    finally:
        _stop(server)


def _stop(process: "subprocess.Popen[bytes]") -> None:
    """Ask a child to stop (SIGTERM), kill it if it has not within STOP_SECONDS."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _say(text: str) -> None:
    print(text, flush=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _arbiter(*args: str, stdin: str = "") -> str:
    done = subprocess.run(  # noqa: S603 - our own command
        [*ARBITER, *args], input=stdin, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"arbiter {args[0]} {args[1]} failed:\n{done.stderr}")
    return done.stdout.strip()


def _account(data: Path, name: str, *, approver: bool = False) -> tuple[str, str]:
    """Create an account with a random password: (its password, a worker token)."""
    flags = ["--approver"] if approver else []
    password = secrets.token_urlsafe(12)
    _arbiter("users", "create", name, "--password-stdin", *flags, "--data-dir", str(data),
             stdin=password + "\n")  # fmt: skip
    token = _arbiter("users", "token", name, "--label", "demo", "--data-dir", str(data))
    return password, token


def _start_server(data: Path, port: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with log.open("wb") as sink:
        server = subprocess.Popen(  # noqa: S603 - our own command
            [*ARBITER, "serve", "--port", str(port), "--data-dir", str(data)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, **LOCAL_REPOSITORY},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server did not start; see {log}")
        try:
            if httpx.get(f"{url}/api/active_runs", timeout=1.0).status_code == 200:
                _say(f"Server running at {url} (log: {log})")
                return server, url
        except httpx.TransportError:
            time.sleep(0.1)
    server.terminate()
    raise SystemExit(f"the server did not answer within {START_SECONDS:.0f} s; see {log}")


def _submit(url: str, owner: str, approver: str, repo_url: str) -> str:
    body: dict[str, Any] = {
        "tests_repo": repo_url,
        "base_tag": "master",
        "new_tag": "stronger",
        "tc": TC,
        "sprt": SPRT,
        "book": SHIPPED_BOOK,  # served by the server itself: the demo needs no network
        "info": "arbiter demo: the same engine searching 5x more nodes per move",
    }
    reply = httpx.post(f"{url}/api/runs", json=body, headers=_bearer(owner), timeout=60.0)
    if reply.status_code != 200:
        raise SystemExit(f"submitting the run failed: {reply.text}")
    run_id = str(reply.json()["run_id"])
    approved = httpx.post(f"{url}/api/runs/{run_id}/approve", headers=_bearer(approver))
    if approved.status_code != 200:
        raise SystemExit(f"approving the run failed: {approved.text}")
    return run_id


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _run_worker(url: str, token: str, directory: Path) -> None:
    """The worker until the test is decided; its token goes through the
    environment, not the command line (which `ps` shows)."""
    args = [
        *ARBITER,
        "worker",
        "--server", url,
        "--username", "demo",
        "--data-dir", str(directory),
        "--fleet",
    ]  # fmt: skip
    env = {**os.environ, TOKEN_VARIABLE: token, ALLOW_VARIABLE: "file"}
    worker = subprocess.Popen(args, env=env)  # noqa: S603 - our own command
    try:
        worker.wait()
    finally:
        _stop(worker)


def _summary(url: str, run_id: str) -> None:
    run = httpx.get(f"{url}/api/get_run/{run_id}").json()
    results = run["results"]
    sprt = run["args"].get("sprt", {})
    _say(
        f"\nRun finished: {run['finished']}; SPRT {sprt.get('state') or 'undecided'} "
        f"(LLR {sprt.get('llr', 0.0):.2f}); W {results['wins']} L {results['losses']} "
        f"D {results['draws']}"
    )
