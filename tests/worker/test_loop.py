"""The main loop: back-off, fleet mode, the stop file, the lock, closing tasks."""

import io
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from arbiter.worker import loop
from arbiter.worker.assignment import Assignment
from arbiter.worker.control import Control
from arbiter.worker.engines import EngineCache
from arbiter.worker.errors import ConfigError, FatalError, RunError, WorkerError
from arbiter.worker.loop import (
    Backoff,
    Outcome,
    RefusedForNow,
    directory_lock,
    iteration,
    run_loop,
)
from arbiter.worker.state import StateFile, describe, read_state
from arbiter.worker.status import StatusLine
from arbiter.worker.task import TaskContext
from tests.worker.fakes import FakeServer, task_reply, worker_config
from tests.worker.support import LOCAL_REPOS


def context(tmp_path: Path, server: FakeServer) -> TaskContext:
    return TaskContext(
        client=server.client(),
        config=worker_config(tmp_path),
        engines=EngineCache(tmp_path / "engines", None, 1, policy=LOCAL_REPOS),
        control=Control(),
        status=StatusLine(io.StringIO(), interactive=False),
        books_dir=tmp_path / "books",
        nets_dir=tmp_path / "nets",
        state=StateFile(tmp_path, server="http://server", machine="m"),
    )


def scripted(task: dict[str, Any] | None = None, version: int = 325) -> FakeServer:
    def handler(path: str, _body: dict[str, Any]) -> dict[str, Any]:
        if path == "/api/request_version":
            return {"version": version}
        if path == "/api/request_task":
            return task if task is not None else {"task_waiting": False}
        return {}

    return FakeServer(handler)


def test_backoff_doubles_to_fifteen_minutes() -> None:
    backoff, delays, delay = Backoff(), [], 15.0
    for _ in range(8):
        delays.append(delay)
        delay = backoff.next(delay)
    assert delays == [15, 30, 60, 120, 240, 480, 900, 900]


def test_one_worker_per_directory(tmp_path: Path) -> None:
    with (
        directory_lock(tmp_path),
        pytest.raises(ConfigError, match="already running"),
        directory_lock(tmp_path),
    ):
        pass
    with directory_lock(tmp_path):
        pass  # released


def test_fleet_mode_exits_when_there_is_no_work(tmp_path: Path) -> None:
    server = scripted()
    assert run_loop(context(tmp_path, server), fleet=True) == 0
    assert server.paths() == ["/api/request_version", "/api/request_task"]


def test_waiting_grows_and_a_signal_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = context(tmp_path, scripted())
    waits: list[float] = []

    def wait(_ctx: TaskContext, seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) == 3

    monkeypatch.setattr(loop, "_wait", wait)
    assert run_loop(ctx, fleet=False) == 0
    assert waits == [15.0, 30.0, 60.0]


def test_a_played_task_resets_the_backoff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context(tmp_path, scripted())
    outcomes = iter([Outcome.FAILED, Outcome.FAILED, Outcome.DONE, Outcome.NO_TASK])
    waits: list[float] = []
    monkeypatch.setattr(loop, "iteration", lambda _ctx: next(outcomes))

    def wait(_ctx: TaskContext, seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) == 3

    monkeypatch.setattr(loop, "_wait", wait)
    run_loop(ctx, fleet=False)
    assert waits == [15.0, 30.0, 15.0]


def test_the_stop_file(tmp_path: Path) -> None:
    server = scripted()
    ctx = context(tmp_path, server)
    (tmp_path / "stop").touch()
    assert run_loop(ctx, fleet=False) == 0
    assert server.calls == []
    assert not (tmp_path / "stop").exists()  # honoured once
    (tmp_path / "stop").touch()
    assert loop._wait(ctx, 3.0) is True


def test_refused_credentials_end_the_worker(tmp_path: Path) -> None:
    server = FakeServer(lambda _p, _b: {"error": "/api/request_version: Your account is blocked."})
    ctx = context(tmp_path, server)
    assert iteration(ctx) is Outcome.EXIT
    assert run_loop(ctx, fleet=False) == 1


def test_request_task_outcomes(tmp_path: Path) -> None:
    assert iteration(context(tmp_path, scripted())) is Outcome.NO_TASK
    refused = scripted({"task_waiting": False, "error": "Machine limit reached for user alice."})
    assert iteration(context(tmp_path, refused)) is Outcome.FAILED
    down = FakeServer(lambda _p, _b: httpx.ConnectError("down"))
    assert iteration(context(tmp_path, down)) is Outcome.FAILED


@pytest.mark.parametrize("path", ["/api/request_version", "/api/request_task"])
def test_a_refusal_for_now_is_no_failure_and_no_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A restart or an overload answers 503 with Retry-After: the worker waits
    what it was asked (at least 15 s, plus jitter), never doubles the wait,
    and stays in fleet mode too."""
    refusals = iter(range(3))

    def handler(called: str, _body: dict[str, Any]) -> Any:
        if called == path and next(refusals, None) is not None:
            return httpx.Response(503, json=f"{path}: busy", headers={"retry-after": "40"})
        return {"version": 325} if called == "/api/request_version" else {"task_waiting": False}

    ctx = context(tmp_path, FakeServer(handler))
    waits: list[float] = []

    def wait(_ctx: TaskContext, seconds: float) -> bool:
        waits.append(seconds)
        return False

    monkeypatch.setattr(loop, "_wait", wait)
    assert run_loop(ctx, fleet=True) == 0  # after the refusals, no work: fleet mode ends
    assert len(waits) == 3
    assert all(40.0 <= wait <= 60.0 for wait in waits)


def test_a_refusal_for_now_waits_at_least_the_backoffs_start() -> None:
    for _ in range(20):
        assert 15.0 <= Backoff().after_refusal(RefusedForNow(1.0)) <= 22.5


@pytest.mark.parametrize(
    ("error", "outcome", "closing"),
    [
        (None, Outcome.DONE, None),
        (WorkerError("build failed"), Outcome.FAILED, "/api/failed_task"),
        (RunError("Wrong bench"), Outcome.FAILED, "/api/stop_run"),
        (FatalError("too slow"), Outcome.EXIT, "/api/failed_task"),
        (ZeroDivisionError("bug"), Outcome.EXIT, "/api/failed_task"),
    ],
)
def test_each_ending_closes_the_task_its_way(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception | None,
    outcome: Outcome,
    closing: str | None,
) -> None:
    def run_task(_ctx: TaskContext, _assignment: Assignment) -> None:
        if error is not None:
            raise error

    monkeypatch.setattr(loop, "run_task", run_task)
    server = scripted(task_reply(task_id=5))
    ctx = context(tmp_path, server)
    assert iteration(ctx) is outcome
    closings = [(p, b) for p, b in server.calls if p in ("/api/failed_task", "/api/stop_run")]
    if closing is None:
        assert closings == []
        return
    assert [p for p, _ in closings] == [closing]
    assert closings[0][1]["task_id"] == 5
    assert str(error) in closings[0][1]["message"]
    if isinstance(error, ZeroDivisionError):
        assert closings[0][1]["message"].startswith(
            "Exception ZeroDivisionError: bug at test_loop.py:"
        )
        assert closings[0][1]["message"].endswith("WorkerVersion: 325")
    assert ctx.control.current is None


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (FatalError("this machine is too slow: 110201 nps, at least 180000 needed"), "too slow"),
        (ZeroDivisionError("bug"), "Exception ZeroDivisionError: bug at test_loop.py:"),
    ],
)
def test_worker_status_says_why_the_worker_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, said: str
) -> None:
    def run_task(_ctx: TaskContext, _assignment: Assignment) -> None:
        raise error

    monkeypatch.setattr(loop, "run_task", run_task)
    assert run_loop(context(tmp_path, scripted(task_reply(task_id=5))), fleet=False) == 1
    document = read_state(tmp_path)
    assert document is not None
    note = describe(document, running=False, now=0.0)[-1]
    assert note.startswith("note: the worker stopped: "), note
    assert said in note


def test_refused_credentials_are_the_status_note(tmp_path: Path) -> None:
    server = FakeServer(lambda _p, _b: {"error": "/api/request_version: Your account is blocked."})
    assert run_loop(context(tmp_path, server), fleet=False) == 1
    document = read_state(tmp_path)
    assert document is not None
    assert "the worker stopped: the server refused the credentials" in document["note"]


def test_a_signal_during_a_task_exits_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run_task(ctx: TaskContext, _assignment: Assignment) -> None:
        ctx.control.request_stop("SIGTERM")
        raise FatalError("worker stopped (SIGTERM)")

    monkeypatch.setattr(loop, "run_task", run_task)
    server = scripted(task_reply())
    assert run_loop(context(tmp_path, server), fleet=False) == 0
    assert server.paths()[-1] == "/api/failed_task"
