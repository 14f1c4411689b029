"""`arbiter worker` as a person starts it: flags, the saved configuration,
the credentials check against a real server, one worker per directory."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arbiter.cli import build_parser
from arbiter.worker import cli
from arbiter.worker.arguments import TOKEN_VARIABLE
from arbiter.worker.loop import directory_lock
from tests.worker.e2e import Accounts, arena
from tests.worker.support import needs_stockfish

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


def test_a_token_file_open_to_others_is_refused_and_its_path_is_saved(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("arb_secret-in-a-file\n")
    token.chmod(0o644)
    data = tmp_path / "worker"
    done = worker("--data-dir", str(data), "--server", "http://127.0.0.1:9",
                  "--username", "alice", "--token-file", str(token))  # fmt: skip
    assert done.returncode == 2
    assert f"{token} has mode 0644" in done.stderr
    assert f"chmod 600 {token}" in done.stderr
    saved = (data / "worker.ini").read_text()
    assert f"token_file = {token}" in saved
    assert "arb_secret-in-a-file" not in saved
    done = worker("--data-dir", str(data), "--password", "x", "--concurrency", "0")
    assert done.returncode == 2  # stopped by the concurrency; the password replaced the file
    saved = (data / "worker.ini").read_text()
    assert "token_file = \n" in saved
    assert "password = x" in saved


def test_the_token_may_come_from_a_file_or_the_environment(
    accounts: Accounts, tmp_path: Path
) -> None:
    """Neither way puts the token on the command line (which `ps` shows)."""
    token = tmp_path / "token"
    token.write_text(accounts.alice + "\n")
    token.chmod(0o600)
    with arena(accounts, tmp_path) as place:
        data = str(tmp_path / "worker")
        start = ["--data-dir", data, "--server", place.server.url, "--username", "alice"]
        done = worker(*start, "--token-file", str(token), "--fleet")
        assert done.returncode == 0, done.stderr  # no work: a fleet worker exits
        assert accounts.alice not in (tmp_path / "worker" / "worker.ini").read_text()
        # A wrong saved password; the environment's token is used instead.
        refused = worker("--data-dir", data, "--password", "wrong")
        assert "refused the credentials" in refused.stderr
        env = {**os.environ, "ARBITER_WORKER_TOKEN": accounts.alice}
        done = subprocess.run([*WORKER, "--data-dir", data], env=env, capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr


def test_the_restarted_worker_keeps_the_credential_this_one_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKEN_VARIABLE, "arb_from_the_environment")
    parser = build_parser()
    given = parser.parse_args(["worker", "--token-file", "/etc/arbiter.token"])
    assert TOKEN_VARIABLE not in cli._restart_environment(given)  # worker.ini names the file
    plain = parser.parse_args(["worker", "--data-dir", "w"])
    assert cli._restart_environment(plain)[TOKEN_VARIABLE] == "arb_from_the_environment"


def test_sample_engine_makes_a_repository_and_says_how_to_test_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    needs_stockfish()
    target = tmp_path / "engine-repo"
    assert cli.sample_engine_command(build_parser().parse_args(["sample-engine", str(target)])) == 0
    printed = capsys.readouterr().out
    assert (
        f"Tests repository {target.as_uri()}, Test branch stronger, Base branch master" in printed
    )
    assert "Time control N=300" in printed
    assert (target / "src" / "Makefile").exists()
    again = build_parser().parse_args(["sample-engine", str(target)])
    assert cli.sample_engine_command(again) == 2  # never written over
    assert "exists and is not empty" in capsys.readouterr().err
