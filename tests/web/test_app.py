"""The app factory and lifespan: threadpool size, single-process primary, migrations."""

import os
import subprocess
import sys

import pytest
from anyio.to_thread import current_default_thread_limiter
from starlette.testclient import TestClient

from arbiter.runtime.settings import TASK_SEMAPHORE_SIZE, THREADPOOL_TOKENS, Settings, SettingsError
from arbiter.web.app import create_app, require_single_process_on_primary
from tests.web.support import state

PRINT_ARGON2_CONCURRENCY = (
    "from arbiter.runtime.settings import Settings; print(Settings().argon2_concurrency)"
)


def test_seed_constants() -> None:
    assert THREADPOOL_TOKENS == 200
    assert TASK_SEMAPHORE_SIZE == 5


def test_lifespan_applies_threadpool_tokens(settings: Settings) -> None:
    with TestClient(create_app(settings.with_changes(threadpool_tokens=123))) as client:
        limiter_tokens = client.portal.call(lambda: current_default_thread_limiter().total_tokens)  # type: ignore[union-attr]
        assert limiter_tokens == 123
        assert state(client).task_semaphore._value == settings.task_semaphore_size


@pytest.mark.parametrize("variable", ["WEB_CONCURRENCY", "UVICORN_WORKERS"])
def test_primary_refuses_several_processes(settings: Settings, variable: str) -> None:
    with pytest.raises(SettingsError, match="one process"):
        require_single_process_on_primary(settings, {variable: "4"})
    require_single_process_on_primary(settings, {variable: "1"})
    require_single_process_on_primary(settings.with_changes(role="secondary"), {variable: "4"})


def test_empty_database_is_migrated_at_start(tmp_path: object, settings: Settings) -> None:
    fresh = settings.with_changes(database_url="", data_dir=settings.data_dir / "fresh")
    with TestClient(create_app(fresh)) as client:
        assert client.get("/tests").status_code == 200
    assert (fresh.data_dir / "arbiter.sqlite3").exists()


def test_settings_from_environment() -> None:
    env = {"ARBITER_PORT": "9001", "ARBITER_ROLE": "secondary", "ARBITER_SECURE_COOKIES": "yes"}
    parsed = Settings.from_env(env)
    assert (parsed.port, parsed.role, parsed.secure_cookies) == (9001, "secondary", True)
    with pytest.raises(SettingsError, match="ARBITER_PORT"):
        Settings.from_env({"ARBITER_PORT": "eighty"})
    with pytest.raises(SettingsError, match="ARBITER_ROLE"):
        Settings.from_env({"ARBITER_ROLE": "leader"})


def test_the_gate_share_per_account_is_read_and_bounded_by_the_gate() -> None:
    assert Settings.from_env({}).task_semaphore_per_account == 0  # half the gate
    parsed = Settings.from_env({"ARBITER_TASK_SEMAPHORE_PER_ACCOUNT": "5"})
    assert parsed.task_semaphore_per_account == TASK_SEMAPHORE_SIZE
    for bad in ("-1", "6"):
        with pytest.raises(SettingsError, match="ARBITER_TASK_SEMAPHORE_PER_ACCOUNT"):
            Settings.from_env({"ARBITER_TASK_SEMAPHORE_PER_ACCOUNT": bad})


def test_argon2_runs_on_half_the_cpus_by_default() -> None:
    """So a flood of guesses leaves the event loop cores (or, pinned to one core,
    a share of it); the setting overrides it."""
    pinned = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", PRINT_ARGON2_CONCURRENCY],
        capture_output=True,
        text=True,
        check=True,
    )
    assert pinned.stdout.strip() == "1"
    cpus = len(os.sched_getaffinity(0))
    assert Settings.from_env({}).argon2_concurrency == max(1, cpus // 2)
    assert Settings.from_env({"ARBITER_ARGON2_CONCURRENCY": "3"}).argon2_concurrency == 3


def test_postgres_urls_select_psycopg() -> None:
    parsed = Settings.from_env({"ARBITER_DATABASE_URL": "postgresql://u@h/db"})
    assert parsed.resolved_database_url == "postgresql+psycopg://u@h/db"


def test_git_settings_are_read_and_checked() -> None:
    parsed = Settings.from_env(
        {"ARBITER_GIT_ALLOW": "git.corp, 10.0.0.0/8, file", "ARBITER_GIT_THREADS": "4"}
    )
    assert (parsed.git_allow, parsed.git_threads) == ("git.corp, 10.0.0.0/8, file", 4)
    assert Settings().git_allow == ""  # public https only, by default
    assert Settings().git_official_repo == ""
    with pytest.raises(SettingsError, match="ARBITER_GIT_ALLOW"):
        Settings.from_env({"ARBITER_GIT_ALLOW": "10.0.0.0/40"})
    with pytest.raises(SettingsError, match="ARBITER_GIT_PER_ACCOUNT"):
        Settings.from_env({"ARBITER_GIT_PER_ACCOUNT": "0"})


def test_files_s3_settings_are_read_and_checked() -> None:
    parsed = Settings.from_env(
        {
            "ARBITER_FILES_S3_BUCKET": "nets",
            "ARBITER_FILES_S3_ENDPOINT": "https://s3.example.org",
            "ARBITER_FILES_S3_ACCESS_KEY_ID": "arbiter",
            "ARBITER_FILES_S3_SECRET_ACCESS_KEY_FILE": "/etc/arbiter/s3-secret",
        }
    )
    assert (parsed.files_s3_bucket, parsed.files_s3_endpoint) == ("nets", "https://s3.example.org")
    assert Settings().files_s3_bucket == ""  # the database holds the bytes by default
    refused = {
        "is set but ARBITER_FILES_S3_BUCKET is not": {"ARBITER_FILES_S3_PREFIX": "arbiter/"},
        "go together": {"ARBITER_FILES_S3_BUCKET": "b", "ARBITER_FILES_S3_ACCESS_KEY_ID": "k"},
        "give the secret one way": {
            "ARBITER_FILES_S3_BUCKET": "b",
            "ARBITER_FILES_S3_ACCESS_KEY_ID": "k",
            "ARBITER_FILES_S3_SECRET_ACCESS_KEY": "s",
            "ARBITER_FILES_S3_SECRET_ACCESS_KEY_FILE": "/f",
        },
        "must be an http:// or https:// URL": {
            "ARBITER_FILES_S3_BUCKET": "b",
            "ARBITER_FILES_S3_ENDPOINT": "s3.example.org",
        },
    }
    for says, environ in refused.items():
        with pytest.raises(SettingsError, match=says):
            Settings.from_env(environ)
