"""Overload: while the event loop lags, worker calls are answered at once (a
"too busy" for request_task, a JSON 503 with Retry-After otherwise); pages are
served as usual, and the shedding ends once the loop has caught up."""

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from arbiter.domain.runs.scheduler import TOO_BUSY
from arbiter.protocol import WORKER_PATHS
from arbiter.runtime.settings import OVERLOAD_LAG_MS, Settings, SettingsError
from arbiter.web import overload
from arbiter.web.overload import LAG_LIMIT, SHED_HOLD, LoopLag
from arbiter.web.replies import DEFAULT_RETRY_AFTER
from tests import fresh_loop
from tests.web.api_support import api_with_users, post, worker_body


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lite(
    tmp_path: Path, sqlite_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    """The worker API on SQLite with shedding on, as `serve` has it (the test
    apps of every other file turn it off)."""
    with api_with_users(
        tmp_path, sqlite_database_url, monkeypatch, overload_lag_ms=OVERLOAD_LAG_MS
    ) as client:
        yield client


def lagging(client: TestClient) -> LoopLag:
    lag: LoopLag = client.app.state.loop_lag  # type: ignore[attr-defined]
    lag.observe(LAG_LIMIT * 2)
    return lag


def test_a_lagging_loop_turns_worker_calls_away_at_once(lite: TestClient) -> None:
    """request_task gets "too busy"; the calls the official worker retries get
    a temporary refusal (a JSON string, never `error`, which it takes as final)."""
    lagging(lite)
    for path in set(WORKER_PATHS) - overload.NEVER_SHED:
        reply = lite.post(path, json=worker_body(run_id="0" * 24, task_id=0))
        if path == "/api/request_task":
            assert reply.status_code == 200
            assert reply.json()["info"] == TOO_BUSY
            assert reply.json()["task_waiting"] is False
            assert isinstance(reply.json()["duration"], float)
        else:
            assert reply.status_code == 503, path
            assert reply.headers["retry-after"] == str(DEFAULT_RETRY_AFTER)
            assert reply.json() == f"{path}: {overload.SHED_MESSAGE}"
        assert reply.headers["x-content-type-options"] == "nosniff"


def test_calls_the_official_worker_never_retries_are_served_while_shedding(
    lite: TestClient,
) -> None:
    """A refused request_spsa ends the official worker's task and a refused
    upload_pgn loses its PGN: both reach their handlers (here: no such task)."""
    lagging(lite)
    for path in overload.NEVER_SHED:
        reply = lite.post(path, json=worker_body(run_id="0" * 24, task_id=0, pgn="H4sI"))
        assert reply.status_code != 503, path
        assert "error" in reply.json()


def test_pages_and_the_rest_of_the_api_are_served_while_shedding(lite: TestClient) -> None:
    lagging(lite)
    assert lite.get("/healthz").status_code == 200
    assert lite.get("/tests").status_code == 200
    assert lite.get("/api/active_runs").status_code == 200


def test_without_lag_worker_calls_are_served(lite: TestClient) -> None:
    status, reply = post(lite, "/api/request_version", worker_body())
    assert status == 200
    assert "version" in reply


def test_shedding_lasts_a_hold_after_the_last_late_timer() -> None:
    clock = Clock()
    lag = LoopLag(clock=clock)
    lag.observe(LAG_LIMIT / 2)
    assert not lag.shedding()
    lag.observe(LAG_LIMIT + 0.01)
    assert lag.shedding()
    clock.now += SHED_HOLD / 2
    lag.observe(0.0)  # caught up: the queue still drains for the rest of the hold
    assert lag.shedding()
    clock.now += SHED_HOLD
    assert not lag.shedding()
    assert lag.worst == pytest.approx(LAG_LIMIT + 0.01)


def test_the_monitor_sees_a_blocked_loop() -> None:
    async def block_the_loop() -> LoopLag:
        lag = LoopLag()
        lag.start()
        await asyncio.sleep(overload.LAG_PERIOD * 2)
        time.sleep(LAG_LIMIT * 1.5)  # the loop's thread busy: every timer runs late
        await asyncio.sleep(overload.LAG_PERIOD * 2)
        await lag.stop()
        return lag

    lag = fresh_loop.run(block_the_loop())
    assert lag.worst > LAG_LIMIT
    assert lag.shedding()


def test_the_limit_is_the_setting_in_milliseconds(lite: TestClient) -> None:
    lag: LoopLag = lite.app.state.loop_lag  # type: ignore[attr-defined]
    assert lag.limit == LAG_LIMIT == OVERLOAD_LAG_MS / 1000


def test_a_limit_of_zero_never_sheds() -> None:
    lag = LoopLag(0.0, clock=Clock())
    lag.observe(60.0)
    assert not lag.shedding()
    assert lag.worst == 60.0  # still measured, for /metrics


def test_a_negative_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="ARBITER_OVERLOAD_LAG_MS"):
        Settings(data_dir=tmp_path, overload_lag_ms=-1).validate()
