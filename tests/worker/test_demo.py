"""`arbiter demo`, start to finish, as a newcomer runs it."""

import os
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx

from tests.web.live_server import CHEAP_HASHING
from tests.worker.support import needs_stockfish


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
