"""`arbiter worker install-service`, and the worker run as its unit runs it."""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import arbiter
from arbiter.cli import main
from arbiter.worker.arguments import CONFIG_NAME
from arbiter.worker.config import apply_flags, read_file, write_file
from arbiter.worker.sample_engine import SampleRepo
from arbiter.worker.service import ServiceOptions, install, unit_text
from tests.worker.e2e import (
    Accounts,
    actions,
    arena,
    games,
    get_task,
    run_pgn_games,
    tasks,
    wait_for,
)

TOKEN = "arb_" + "x" * 40
TC = "N=320000"


def configure(data_dir: Path, server: str, token: str = TOKEN) -> Path:
    """A worker.ini as a first `arbiter worker --token-file ...` leaves it."""
    token_file = data_dir.parent / f"{data_dir.name}.token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    settings = {
        "server": server,
        "username": "alice",
        "token_file": str(token_file),
        "concurrency": "1",
        "uuid_prefix": "svc",
    }
    parser = read_file(data_dir / CONFIG_NAME)
    apply_flags(parser, settings)
    write_file(data_dir / CONFIG_NAME, parser)
    return token_file


def install_unit(data_dir: Path, *extra: str) -> tuple[int, Path]:
    unit = data_dir.parent / "arbiter-worker.service"
    code = main(
        ["worker", "install-service", "--data-dir", str(data_dir), "--output", str(unit), *extra]
    )
    return code, unit


def unit_settings(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )


def unit_environment(settings: dict[str, str]) -> dict[str, str]:
    """The environment the unit gives, without this test's PYTHONPATH."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["ARBITER_WORKER_GIT_ALLOW"] = "file"  # the sample repository is local
    if "Environment" in settings:
        key, value = settings["Environment"].split("=", 1)
        env[key] = value
    return env


def unit_code(settings: dict[str, str]) -> str:
    """The `arbiter` package the unit's interpreter and options import."""
    python, *rest = settings["ExecStart"].split()
    flags = rest[: rest.index("-m")]
    command = [python, *flags, "-c", "import arbiter; print(arbiter.__file__)"]
    done = subprocess.run(
        command, env=unit_environment(settings), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_unit_runs_the_worker_of_the_data_directory_with_its_token_file(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "worker"
    token_file = configure(data_dir, "http://127.0.0.1:9")
    code, unit = install_unit(data_dir)
    assert code == 0
    text = unit.read_text()
    assert TOKEN not in text
    assert "--token" not in text
    settings = unit_settings(text)
    python, *flags, module, name, action, option, where = settings["ExecStart"].split()
    assert python == sys.executable
    assert [module, name, action, option, where] == [
        "-m",
        "arbiter",
        "worker",
        "--data-dir",
        str(data_dir.absolute()),
    ]
    # The unit runs this very code: isolated (-I) where that finds it (a virtual
    # environment), else with the PYTHONPATH it was installed with (this test).
    assert flags in ([], ["-I"])
    assert unit_code(settings) == arbiter.__file__
    assert settings["Restart"] == "on-failure"
    assert settings["KillSignal"] == "SIGTERM"
    assert settings["KillMode"] == "mixed"
    assert settings["TimeoutStopSec"] == "120s"
    assert settings["RestartPreventExitStatus"] == "2"
    assert settings["WantedBy"] == "default.target"
    assert "User" not in settings  # a user unit runs as its user
    assert read_file(data_dir / CONFIG_NAME).get("login", "token_file") == str(token_file)


def test_a_system_unit_names_its_account_and_backs_off_where_systemd_can(tmp_path: Path) -> None:
    options = ServiceOptions(data_dir=tmp_path / "w", system=True, run_as="alice")
    old = unit_settings(unit_text(options, 252))
    assert old["User"] == "alice"
    assert old["RestartSec"] == "60s"
    assert "RestartSteps" not in old  # unknown before systemd 254
    new = unit_settings(unit_text(options, 256))
    assert (new["RestartSec"], new["RestartSteps"], new["RestartMaxDelaySec"]) == (
        "15s",
        "8",
        "15min",
    )
    assert new["WantedBy"] == "multi-user.target"
    odd = ServiceOptions(data_dir=Path("/srv/my workers/100%"), system=False)
    assert "ExecStart=" in unit_text(odd, 252)
    assert '"/srv/my workers/100%%"' in unit_text(odd, 252)


@pytest.mark.parametrize("system", [False, True])
def test_systemd_accepts_the_unit(tmp_path: Path, system: bool) -> None:
    if shutil.which("systemd-analyze") is None:
        # The test command installs it and requires it; elsewhere it may be absent.
        if os.environ.get("ARBITER_TEST_REQUIRE_SYSTEMD") == "1":
            pytest.fail("ARBITER_TEST_REQUIRE_SYSTEMD=1 but systemd-analyze is not installed")
        pytest.skip("no systemd-analyze")
    data_dir = tmp_path / "worker"
    configure(data_dir, "http://127.0.0.1:9")
    options = ServiceOptions(data_dir=data_dir, system=system, run_as="root")
    path = install(options, tmp_path / "arbiter-worker.service")
    verified = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr == "", verified.stderr  # no unknown key, no warning


def test_a_token_on_the_command_line_or_in_a_readable_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "worker"
    assert install_unit(data_dir)[0] == 2
    assert "run `arbiter worker --data-dir" in capsys.readouterr().err
    token_file = configure(data_dir, "http://127.0.0.1:9")
    parser = read_file(data_dir / CONFIG_NAME)
    apply_flags(parser, {"token_file": "", "password": TOKEN})  # saved by --token
    write_file(data_dir / CONFIG_NAME, parser)
    code, unit = install_unit(data_dir)
    assert code == 2
    assert "give --token-file PATH" in capsys.readouterr().err
    assert not unit.exists()
    token_file.chmod(0o644)
    assert install_unit(data_dir, "--token-file", str(token_file))[0] == 2
    assert "chmod 600" in capsys.readouterr().err
    token_file.chmod(0o600)
    assert install_unit(data_dir, "--token-file", str(token_file))[0] == 0
    saved = read_file(data_dir / CONFIG_NAME)
    assert (saved.get("login", "token_file"), saved.get("login", "password")) == (
        str(token_file),
        "",
    )


def status(data_dir: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "arbiter", "worker", "status", "--data-dir", str(data_dir)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def acknowledged_games(printed: str) -> dict[int, int]:
    """The last acknowledged game count the worker printed for each task it began."""
    counts: dict[int, int] = {}
    current = None
    for line in printed.splitlines():
        if (begun := re.search(r"task (\d+) of run \w+: \d+ games", line)) is not None:
            current = int(begun[1])
            counts[current] = 0
        elif current is not None and (report := re.search(r"games (\d+)/\d+", line)):
            counts[current] = int(report[1])
    return counts


def test_sigterm_during_a_game_loses_no_acknowledged_result(
    accounts: Accounts, sample_repo: SampleRepo, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        server = place.server
        run_id = place.submit(sample_repo.url, tc=TC, num_games=400)
        data_dir = tmp_path / "worker"
        configure(data_dir, server.url, accounts.alice)
        code, unit = install_unit(data_dir)
        assert code == 0
        settings = unit_settings(unit.read_text())
        output = tmp_path / "worker.out"
        with output.open("w") as sink:  # the unit's command, in the unit's environment
            process = subprocess.Popen(
                settings["ExecStart"].split(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                env=unit_environment(settings),
                cwd=settings["WorkingDirectory"],
            )
        try:

            def playing() -> str | None:
                """The status text once it shows a task whose first report the server has."""
                shown = status(data_dir)
                found = re.search(r"now: playing task (\d+) of run", shown.stdout)
                if shown.returncode != 0 or found is None or "games " not in shown.stdout:
                    return None
                task = get_task(server, run_id, int(found[1]))
                return shown.stdout if task is not None and games(task["stats"]) > 0 else None

            shown = wait_for(playing, 90, "a first report and a status showing it")
            assert f"{server.url}/workers/alice-1cores-svc" in shown
            process.send_signal(signal.SIGTERM)  # what systemctl stop sends
            assert process.wait(120) == 0, output.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        # Tasks are 28 games here, so one may end, and the next begin, between the
        # status read and the signal: every task is checked against what the
        # worker printed for it (not a terminal: a status line per acknowledged report).
        acknowledged = acknowledged_games(output.read_text())
        played = {
            task_id: games(task["stats"]) for task_id, task in enumerate(tasks(server, run_id))
        }
        assert played == acknowledged, output.read_text()
        assert sum(played.values()) == len(run_pgn_games(server, run_id)) > 0
        assert not any(task["active"] for task in tasks(server, run_id))
        messages = [a["message"] for a in actions(server, run_id, "failed_task")]
        assert any("SIGTERM" in message for message in messages), messages
        after = status(data_dir)
        assert after.returncode == 3
        assert "not running" in after.stdout
        assert "last: stopped (exit status 0)" in after.stdout
