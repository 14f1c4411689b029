"""The state file and `arbiter worker status`."""

import json
from pathlib import Path

import pytest

from arbiter import __version__
from arbiter.cli import main
from arbiter.worker.loop import directory_lock
from arbiter.worker.state import (
    STATE_FILE,
    StateFile,
    TaskProgress,
    describe,
    read_state,
    worker_running,
)

SERVER = "http://127.0.0.1:8000"
PROGRESS = TaskProgress(
    run_id="6543210fedcba98712345678",
    task_id=3,
    label="patch vs master",
    played=34,
    total=200,
    wins=20,
    losses=5,
    draws=9,
    nps=1_020_000.0,
    sprt_llr=(1.234, -2.94, 2.94),
)


def test_the_state_follows_the_worker(tmp_path: Path) -> None:
    state = StateFile(tmp_path, server=SERVER, machine="alice-3cores-ab12")
    state.activity("asking the server for work")
    document = read_state(tmp_path)
    assert document is not None
    assert document["activity"] == "asking the server for work"
    assert document["machine_url"] == f"{SERVER}/workers/alice-3cores-ab12"
    assert document["version"] == __version__
    state.progress(PROGRESS)
    state.note("self-update failed, retried hourly: no network")
    document = read_state(tmp_path)
    assert document is not None
    assert document["task"]["played"] == 34
    lines = describe(document, running=True, now=document["updated"] + 2)
    assert "now: playing task 3 of run 6543210fedcba98712345678 (2 s ago)" in lines
    assert (
        "  patch vs master | games 34/200, 166 left | W 20 L 5 D 9"
        " | run LLR 1.23 [-2.94, 2.94] | 1.02 Mnps"
    ) in lines
    assert "note: self-update failed, retried hourly: no network" in lines
    state.activity("waiting 15 s before asking again")
    document = read_state(tmp_path)
    assert document is not None
    assert document["task"] is None
    assert not list(tmp_path.glob(".*.tmp"))


def test_running_is_the_directory_lock_not_the_file(tmp_path: Path) -> None:
    assert not worker_running(tmp_path)
    with directory_lock(tmp_path):
        assert worker_running(tmp_path)
        assert worker_running(tmp_path)  # looking does not take the lock away
    assert not worker_running(tmp_path)


def test_the_status_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "status", "--data-dir", str(tmp_path)]) == 2
    assert "no worker state" in capsys.readouterr().err
    StateFile(tmp_path, server=SERVER, machine="alice-3cores-ab12").progress(PROGRESS)
    with directory_lock(tmp_path):
        assert main(["worker", "status", "--data-dir", str(tmp_path)]) == 0
        shown = capsys.readouterr().out
        assert ": running, started " in shown
        assert f"machine alice-3cores-ab12: {SERVER}/workers/alice-3cores-ab12" in shown
        assert "games 34/200, 166 left" in shown
    assert main(["worker", "status", "--data-dir", str(tmp_path), "--json"]) == 3
    document = json.loads(capsys.readouterr().out)
    assert document["running"] is False
    assert document["task"]["task_id"] == 3
    (tmp_path / STATE_FILE).write_text("{not json")
    assert main(["worker", "status", "--data-dir", str(tmp_path)]) == 2
