"""`arbiter worker` as a person starts it: flags, the saved configuration,
the credentials check against a real server, one worker per directory."""

import subprocess
import sys
from pathlib import Path

from arbiter.worker.loop import directory_lock
from tests.worker.e2e import Accounts, arena

WORKER = [sys.executable, "-m", "arbiter", "worker"]


def worker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WORKER, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_help_lists_the_flags() -> None:
    done = worker("--help")
    assert done.returncode == 0
    for flag in ("--server", "--username", "--password", "--token", "--concurrency",
                 "--max-memory", "--min-threads", "--uuid-prefix", "--fleet", "--compiler",
                 "--data-dir"):  # fmt: skip
        assert flag in done.stdout


def test_missing_settings_are_named(tmp_path: Path) -> None:
    done = worker("--data-dir", str(tmp_path), "--server", "http://127.0.0.1:9")
    assert done.returncode == 2
    assert "username" in done.stderr
    done = worker("--data-dir", str(tmp_path), "--username", "alice", "--password", "x",
                  "--concurrency", "MAX*100")  # fmt: skip
    assert done.returncode == 2
    assert "concurrency" in done.stderr
    saved = (tmp_path / "worker.ini").read_text()
    assert "server = http://127.0.0.1:9" in saved  # given once, kept
    assert "username = alice" in saved


def test_password_and_token_are_exclusive(tmp_path: Path) -> None:
    done = worker("--data-dir", str(tmp_path), "--password", "a", "--token", "b")
    assert done.returncode == 2
    assert "not allowed with" in done.stderr


def test_one_worker_per_directory(tmp_path: Path) -> None:
    with directory_lock(tmp_path):
        done = worker("--data-dir", str(tmp_path), "--username", "alice", "--password", "x")
    assert done.returncode == 2
    assert "another worker is already running" in done.stderr


def test_bad_credentials_give_a_clear_message(accounts: Accounts, tmp_path: Path) -> None:
    with arena(accounts, tmp_path) as place:
        data = str(tmp_path / "worker")
        done = worker("--data-dir", data, "--server", place.server.url,
                      "--username", "alice", "--password", "wrong")  # fmt: skip
        assert done.returncode == 1
        assert "refused the credentials" in done.stderr
        assert "Invalid username or password" in done.stderr
        # The saved configuration is reused: only the token changes.
        done = worker("--data-dir", data, "--token", "arb_not-a-token")
        assert done.returncode == 1
        assert "refused the credentials" in done.stderr
