"""Background jobs and the web app: they never take the request threadpool
(a login on the UI still answers while every job is busy), run on
the primary only, and stop during shutdown after the drain, before storage closes."""

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from anyio.to_thread import current_default_thread_limiter
from sqlalchemy import Engine
from starlette.testclient import TestClient

from arbiter.jobs import JOB_THREADS, Job
from arbiter.runtime.settings import Settings
from arbiter.runtime.state import AppState
from arbiter.web.app import DRAIN_SECONDS, create_app
from tests.jobs.support import wait_until
from tests.web.live_server import start_server, stop
from tests.web.support import log_in, make_user, state

# Fewer request threads than there are jobs: if jobs ran on the request
# threadpool they would hold every token and the login below would starve.
REQUEST_TOKENS = 8
BLOCKING_JOBS = REQUEST_TOKENS + 2


def table_of(jobs: Sequence[Job]) -> Callable[[AppState], Sequence[Job]]:
    return lambda _state: jobs


def borrowed_request_threads(client: TestClient) -> float:
    portal = client.portal
    assert portal is not None
    return portal.call(lambda: current_default_thread_limiter().borrowed_tokens)


def test_a_login_still_answers_while_every_job_is_busy(settings: Settings) -> None:
    release = threading.Event()
    entered: list[str] = []

    def block() -> None:
        entered.append(threading.current_thread().name)
        release.wait(30)

    jobs = [Job(f"busy{i}", 0.05, 0, block, jitter=0) for i in range(BLOCKING_JOBS)]
    app = create_app(
        settings.with_changes(threadpool_tokens=REQUEST_TOKENS), job_table=table_of(jobs)
    )
    with TestClient(app) as client, ThreadPoolExecutor(1) as browser:
        try:
            make_user(client)
            wait_until(lambda: len(entered) >= JOB_THREADS)  # every job thread is blocked
            assert len(entered) == JOB_THREADS
            scheduler = state(client).jobs
            assert scheduler is not None
            assert all(status.running for status in scheduler.status())  # the rest queue
            assert borrowed_request_threads(client) == 0

            began = time.monotonic()
            browser.submit(log_in, client).result(timeout=20)
            assert time.monotonic() - began < 5
            assert len(entered) == JOB_THREADS  # still blocked, still only the job threads
        finally:
            release.set()
        wait_until(lambda: all(status.runs >= 1 for status in scheduler.status()))
    assert all(name.startswith("arbiter-job_") for name in entered), entered


def test_a_secondary_runs_only_the_download_count_flush(settings: Settings) -> None:
    def never(_state: AppState) -> Sequence[Job]:
        raise AssertionError("a secondary must not build the primary's job table")

    with TestClient(create_app(settings.with_changes(role="secondary"), job_table=never)) as client:
        scheduler = state(client).jobs
        assert scheduler is not None
        assert [status.name for status in scheduler.status()] == ["flush_download_counts"]
        assert client.get("/tests").status_code == 200


def test_jobs_can_be_turned_off(settings: Settings) -> None:
    assert Settings.from_env({"ARBITER_JOBS": "0"}).jobs is False
    assert Settings.from_env({}).jobs is True
    with TestClient(create_app(settings.with_changes(jobs=False))) as client:
        assert state(client).jobs is None


def test_a_primary_runs_the_job_table_until_shutdown(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        scheduler = state(client).jobs
        assert scheduler is not None
        names = {status.name for status in scheduler.status()}
        expected = {"purge_expired_sessions", "scavenge_dead_tasks", "refresh_run_rates"}
        assert names == {
            *expected,
            "reload_book_catalogue",
            "check_catalogue_fetchable",
            "flush_download_counts",
            "deliver_webhooks",
            "check_machine_health",
        }
        assert scheduler.run_now("purge_expired_sessions").result(timeout=30).last_error is None
        assert scheduler.run_now("check_machine_health").result(timeout=30).last_error is None
    with pytest.raises(RuntimeError, match="stopped"):
        scheduler.run_now("purge_expired_sessions")


def test_shutdown_drains_then_waits_for_jobs_then_closes_storage(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []

    def finishing_after_drain(app_state: AppState) -> None:
        wait_until(lambda: app_state.shutting_down, timeout=30)
        events.append("shutdown began")
        time.sleep(DRAIN_SECONDS + 0.3)  # outlives the drain
        app_state.accounts.purge_expired_sessions()  # storage is still open
        events.append("job done")

    def table(app_state: AppState) -> Sequence[Job]:
        return [Job("late", 3600, 0, lambda: finishing_after_drain(app_state))]

    with TestClient(create_app(settings, job_table=table)) as client:
        engine: Engine = state(client).engine
        dispose = engine.dispose
        monkeypatch.setattr(engine, "dispose", lambda: (events.append("dispose"), dispose())[1])
        scheduler = state(client).jobs
        assert scheduler is not None
        wait_until(lambda: scheduler.status()[0].running)
    assert events == ["shutdown began", "job done", "dispose"]


def test_a_real_server_starts_and_stops_its_jobs(tmp_path: Path) -> None:
    server = start_server(tmp_path / "on")
    stop(server)
    assert "job scheduler started: scavenge_dead_tasks, " in server.output()
    assert "job scheduler stopped" in server.output()

    quiet = start_server(tmp_path / "off", extra_env={"ARBITER_JOBS": "0"})
    stop(quiet)
    assert "job scheduler" not in quiet.output()
