"""`arbiter demo`, start to finish, as a newcomer runs it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx

from arbiter.worker import demo
from arbiter.worker.match.timecontrol import parse_time_control
from tests.web.live_server import CHEAP_HASHING
from tests.worker.support import needs_stockfish


def test_the_demo_needs_no_particular_speed() -> None:
    """A clock run refuses machines below a speed floor; the demo must finish on
    a slow or loaded one, so its test is played at fixed nodes."""
    assert parse_time_control(demo.TC).is_nodes
    assert demo.SPRT["batch_size"] <= 16  # reports (and can stop) every few dozen games


def test_the_demo_runs_an_sprt_to_its_end(tmp_path: Path) -> None:
    needs_stockfish()
    env = {**os.environ, **CHEAP_HASHING}
    done = subprocess.run(
        [sys.executable, "-m", "arbiter", "demo", "--exit", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Watch it at  http://127.0.0.1:" in output
    assert "demo      password " in output
    assert "approver  password " in output
    assert "Run finished: True; SPRT accepted" in output, output
    assert (tmp_path / "engine-repo" / "src" / "engine.py").exists()
    assert "bench:" in (tmp_path / "worker" / "worker.log").read_text()
    url = next(line.split()[-1] for line in output.splitlines() if "Watch it at" in line)
    try:
        httpx.get(url, timeout=1.0)
    except httpx.TransportError:
        pass  # --exit: the server is gone
    else:
        raise AssertionError("the server outlived `arbiter demo --exit`")


def test_sigterm_stops_the_demo_its_server_and_removes_its_temporary_folder(
    tmp_path: Path,
) -> None:
    """The accounts' passwords are printed and work; SIGTERM (as Ctrl-C) stops the
    worker and the server, and with --exit the temporary folder goes too."""
    needs_stockfish()
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, **CHEAP_HASHING, "TMPDIR": str(temporary)}
    demo = subprocess.Popen(
        [sys.executable, "-m", "arbiter", "demo", "--exit"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        lines = _read_until(demo, "Watch it at")
        passwords = dict(
            line.split()[:3:2] for line in lines if line.strip().startswith(("demo ", "approver "))
        )
        url = next(line.split()[-1] for line in lines if "log in at" in line).rstrip("):")
        url = url.removesuffix("/login")
        for name, password in passwords.items():
            body = {"password": password, "worker_info": {"username": name}}
            reply = httpx.post(f"{url}/api/request_version", json=body, timeout=10.0)
            assert reply.status_code == 200, (name, reply.text)
        assert set(passwords) == {"demo", "approver"}
        demo.send_signal(signal.SIGTERM)
        output, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, output
    assert "Removed" in output
    assert list(temporary.iterdir()) == []
    try:
        httpx.get(f"{url}/api/active_runs", timeout=1.0)
    except httpx.TransportError:
        pass
    else:
        raise AssertionError("the server outlived SIGTERM to `arbiter demo`")


def _read_until(process: "subprocess.Popen[str]", marker: str, timeout: float = 120) -> list[str]:
    """The process's output lines up to the first holding `marker`."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError("the demo ended early:\n" + "".join(lines))
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"no {marker!r} within {timeout} s:\n" + "".join(lines))
