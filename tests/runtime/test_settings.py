"""Settings on their own: every default, every ARBITER_* spelling, every refusal
word for word (operators read these messages, and mutation testing checks them)."""

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest

from arbiter.runtime.settings import Settings, SettingsError, half_the_cpus, parse_networks

# The documented defaults (docs/operations.md), except argon2_concurrency (the CPUs).
DEFAULTS: dict[str, Any] = {
    "host": "127.0.0.1",
    "port": 8000,
    "data_dir": Path("arbiter-data"),
    "database_url": "",
    "role": "primary",
    "threadpool_tokens": 200,
    "task_semaphore_size": 5,
    "task_semaphore_per_account": 0,
    "max_body_bytes": 2 * 1024 * 1024,
    "max_upload_bytes": 200 * 1024 * 1024,
    "max_header_bytes": 32 * 1024,
    "max_headers": 100,
    "header_timeout_seconds": 20,
    "body_timeout_seconds": 30,
    "body_min_bytes_per_second": 16 * 1024,
    "max_connections": 0,
    "query_seconds": 15,
    "secret_key": "",
    "session_days": 400,
    "session_hours": 12,
    "argon2_time_cost": 2,
    "argon2_memory_kib": 19456,
    "argon2_parallelism": 1,
    "password_account_free_failures": 5,
    "password_address_free_failures": 20,
    "password_max_delay_seconds": 900,
    "password_forget_seconds": 3600,
    "argon2_waiting": 8,
    "argon2_wait_ms": 500,
    "signups_per_address_per_hour": 5,
    "throttle_entries": 100_000,
    "secure_cookies": False,
    "base_url": "",
    "log_level": "info",
    "access_log": True,
    "jobs": True,
    "allow_self_approval": False,
    "webhook_period_seconds": 5,
    "webhook_allow_private": False,
    "lease_check_seconds": 5,
    "git_allow": "",
    "git_ssh": False,
    "git_threads": 8,
    "git_per_account": 2,
    "git_timeout_seconds": 20,
    "git_retry_after_seconds": 10,
    "git_cache_mib": 2048,
    "git_max_depth": 4096,
    "git_diff_kib": 512,
    "git_official_repo": "",
    "metrics_allow": "127.0.0.1,::1",
    "log_format": "text",
    "files_s3_bucket": "",
    "files_s3_endpoint": "",
    "files_s3_region": "",
    "files_s3_access_key_id": "",
    "files_s3_secret_access_key": "",
    "files_s3_secret_access_key_file": "",
    "files_s3_prefix": "",
    "extra": {},
}


def refused(message: str, **environ: str) -> None:
    """Settings.from_env(ARBITER_<NAME>=value...) raises exactly `message`."""
    variables = {f"ARBITER_{name.upper()}": value for name, value in environ.items()}
    with pytest.raises(SettingsError, match=f"^{re.escape(message)}$"):
        Settings.from_env(variables)


def test_every_default() -> None:
    settings = Settings.from_env({})
    assert {name: getattr(settings, name) for name in DEFAULTS} == DEFAULTS
    assert settings.argon2_concurrency == half_the_cpus()
    assert type(settings.argon2_concurrency) is int  # a count of threads, never 1.5
    assert settings.is_primary
    assert settings.metrics_networks == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("::1/128"),
    )


def test_the_database_is_a_file_in_the_data_directory_unless_named(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'arbiter.sqlite3'}"
    named = Settings(data_dir=tmp_path, database_url="postgres://u@h/db")
    assert named.resolved_database_url == "postgresql+psycopg://u@h/db"


@pytest.mark.parametrize("spelling", ["1", "true", "YES", " on "])
def test_true_is_spelled_four_ways(spelling: str) -> None:
    assert Settings.from_env({"ARBITER_SECURE_COOKIES": spelling}).secure_cookies is True


@pytest.mark.parametrize("spelling", ["0", "false", "No", "off", ""])
def test_false_is_spelled_five_ways(spelling: str) -> None:
    assert Settings.from_env({"ARBITER_ACCESS_LOG": spelling}).access_log is False


def test_a_word_that_is_no_boolean_is_refused() -> None:
    refused("ARBITER_JOBS: expected a boolean, got 'maybe'", jobs="maybe")


def test_each_kind_of_value_is_read_from_its_variable() -> None:
    parsed = Settings.from_env(
        {
            "ARBITER_PORT": "9000",
            "ARBITER_DATA_DIR": "/srv/arbiter",
            "ARBITER_HOST": "10.9.8.7",
            "ARBITER_ROLE": "secondary",
            "ARBITER_EXTRA": "ignored",  # `extra` is no variable
            "OTHER_PORT": "1",
        }
    )
    assert (parsed.port, parsed.data_dir, parsed.host) == (9000, Path("/srv/arbiter"), "10.9.8.7")
    assert not parsed.is_primary
    assert parsed.extra == {}


def test_the_process_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARBITER_PORT", "8123")
    assert Settings.from_env().port == 8123


def test_flags_override_the_environment_unless_unset() -> None:
    environ = {"ARBITER_PORT": "9000", "ARBITER_HOST": "10.0.0.1"}
    parsed = Settings.from_env(environ, port=9100, host=None)
    assert (parsed.port, parsed.host) == (9100, "10.0.0.1")


def test_flags_are_checked_too() -> None:
    with pytest.raises(SettingsError, match=r"^ARBITER_PORT must be positive$"):
        Settings.from_env({}, port=0)
    with pytest.raises(SettingsError, match=r"^ARBITER_PORT must be positive$"):
        Settings().with_changes(port=0)
    assert Settings().with_changes(port=1).port == 1


def test_an_unknown_role_is_refused() -> None:
    refused("ARBITER_ROLE must be primary, secondary or standby, not 'leader'", role="leader")


POSITIVE = [
    "port",
    "threadpool_tokens",
    "task_semaphore_size",
    "max_body_bytes",
    "max_header_bytes",
    "max_headers",
    "header_timeout_seconds",
    "body_timeout_seconds",
    "body_min_bytes_per_second",
    "webhook_period_seconds",
    "lease_check_seconds",
    "password_max_delay_seconds",
    "argon2_concurrency",
    "argon2_wait_ms",
    "signups_per_address_per_hour",
    "throttle_entries",
    "git_threads",
    "git_per_account",
    "git_timeout_seconds",
    "git_retry_after_seconds",
    "git_cache_mib",
    "git_max_depth",
    "git_diff_kib",
]


@pytest.mark.parametrize("name", POSITIVE)
def test_a_count_that_must_be_positive_refuses_zero(name: str) -> None:
    refused(f"ARBITER_{name.upper()} must be positive", **{name: "0"})


@pytest.mark.parametrize("name", POSITIVE)
def test_a_count_that_must_be_positive_takes_one(name: str) -> None:
    # The gate must stay below the threadpool, and per account within the gate.
    lowest = {"threadpool_tokens": "6", "task_semaphore_size": "1"}
    assert getattr(Settings.from_env({f"ARBITER_{name.upper()}": lowest.get(name, "1")}), name)


@pytest.mark.parametrize(
    "name",
    ["password_account_free_failures", "password_address_free_failures", "argon2_waiting"],
)
def test_a_count_that_may_be_zero_refuses_less(name: str) -> None:
    assert getattr(Settings.from_env({f"ARBITER_{name.upper()}": "0"}), name) == 0
    refused(f"ARBITER_{name.upper()} must be 0 or more", **{name: "-1"})


def test_connections_are_automatic_at_zero_and_never_negative() -> None:
    assert Settings.from_env({"ARBITER_MAX_CONNECTIONS": "1"}).max_connections == 1
    refused("ARBITER_MAX_CONNECTIONS must be 0 (automatic) or positive", max_connections="-1")


def test_the_request_query_bound_is_lifted_at_zero_and_never_negative() -> None:
    assert Settings.from_env({"ARBITER_QUERY_SECONDS": "0"}).query_seconds == 0
    refused("ARBITER_QUERY_SECONDS must be 0 (no bound) or positive", query_seconds="-1")


def test_logs_are_text_or_json() -> None:
    assert Settings.from_env({"ARBITER_LOG_FORMAT": "json"}).log_format == "json"
    refused("ARBITER_LOG_FORMAT must be text or json, not 'xml'", log_format="xml")


def test_the_books_url_is_http_or_empty() -> None:
    assert Settings.from_env({}).books_url.startswith("https://")
    assert Settings.from_env({"ARBITER_BOOKS_URL": ""}).books_url == ""
    mirror = Settings.from_env({"ARBITER_BOOKS_URL": "http://mirror.lan/books"})
    assert mirror.books_url == "http://mirror.lan/books"
    refused("ARBITER_BOOKS_URL must be an http(s) URL, not 'file:///srv'", books_url="file:///srv")


def test_metrics_readers_are_addresses_or_networks() -> None:
    parsed = Settings.from_env({"ARBITER_METRICS_ALLOW": " 10.1.2.3/8, ,::1 "})
    assert parsed.metrics_networks == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )
    refused("ARBITER_METRICS_ALLOW: 'router' is not an address or network", metrics_allow="router")


def test_no_networks_is_an_empty_list() -> None:
    assert parse_networks("") == ()
    assert parse_networks(" , ") == ()


def test_the_task_gate_stays_below_the_threadpool() -> None:
    assert Settings.from_env({}, threadpool_tokens=6, task_semaphore_size=5).is_primary
    with pytest.raises(SettingsError, match=r"^ARBITER_TASK_SEMAPHORE_SIZE must be below"):
        Settings.from_env({}, threadpool_tokens=5, task_semaphore_size=5)


@pytest.mark.parametrize("share", ["-1", "6"])
def test_the_share_per_account_lies_within_the_gate(share: str) -> None:
    refused(
        "ARBITER_TASK_SEMAPHORE_PER_ACCOUNT must be 0 (half the gate)"
        " to ARBITER_TASK_SEMAPHORE_SIZE",
        task_semaphore_per_account=share,
    )


def test_passwords_are_forgotten_no_sooner_than_the_longest_wait() -> None:
    same = {"ARBITER_PASSWORD_FORGET_SECONDS": "900", "ARBITER_PASSWORD_MAX_DELAY_SECONDS": "900"}
    assert Settings.from_env(same).password_forget_seconds == 900
    refused(
        "ARBITER_PASSWORD_FORGET_SECONDS must be at least ARBITER_PASSWORD_MAX_DELAY_SECONDS",
        password_forget_seconds="899",
        password_max_delay_seconds="900",
    )


def test_a_bad_repository_allowance_is_refused_with_the_policys_words() -> None:
    refused("ARBITER_GIT_ALLOW: '10.0.0.0/40' is not an address range", git_allow="10.0.0.0/40")


S3_OTHERS = [
    "files_s3_endpoint",
    "files_s3_region",
    "files_s3_access_key_id",
    "files_s3_secret_access_key",
    "files_s3_secret_access_key_file",
    "files_s3_prefix",
]


@pytest.mark.parametrize("name", S3_OTHERS)
def test_an_s3_setting_needs_the_bucket(name: str) -> None:
    refused(
        f"ARBITER_{name.upper()} is set but ARBITER_FILES_S3_BUCKET is not",
        **{name: "https://x"},
    )


def test_the_first_s3_setting_given_is_named() -> None:
    refused(
        "ARBITER_FILES_S3_REGION is set but ARBITER_FILES_S3_BUCKET is not",
        files_s3_region="eu",
        files_s3_prefix="a/",
    )


def test_the_s3_secret_is_given_one_way() -> None:
    refused(
        "ARBITER_FILES_S3_SECRET_ACCESS_KEY and ..._SECRET_ACCESS_KEY_FILE:"
        " give the secret one way",
        files_s3_bucket="b",
        files_s3_access_key_id="k",
        files_s3_secret_access_key="s",
        files_s3_secret_access_key_file="/f",
    )


@pytest.mark.parametrize(
    "given",
    [
        {"files_s3_access_key_id": "k"},
        {"files_s3_secret_access_key": "s"},
        {"files_s3_secret_access_key_file": "/f"},
    ],
)
def test_the_s3_key_and_its_secret_go_together(given: dict[str, str]) -> None:
    refused(
        "ARBITER_FILES_S3_ACCESS_KEY_ID and its secret go together (or neither:"
        " boto3's own credentials)",
        files_s3_bucket="b",
        **given,
    )


@pytest.mark.parametrize(
    "secret", ["files_s3_secret_access_key", "files_s3_secret_access_key_file"]
)
def test_an_s3_key_with_its_secret_either_way(secret: str) -> None:
    environ = {"bucket": "b", "access_key_id": "k", secret.removeprefix("files_s3_"): "s"}
    parsed = Settings.from_env({f"ARBITER_FILES_S3_{k.upper()}": v for k, v in environ.items()})
    assert parsed.files_s3_access_key_id == "k"


@pytest.mark.parametrize("endpoint", ["http://minio:9000", "https://s3.example.org"])
def test_an_s3_endpoint_is_an_http_url(endpoint: str) -> None:
    environ = {"ARBITER_FILES_S3_BUCKET": "b", "ARBITER_FILES_S3_ENDPOINT": endpoint}
    assert Settings.from_env(environ).files_s3_endpoint == endpoint
    refused(
        "ARBITER_FILES_S3_ENDPOINT must be an http:// or https:// URL",
        files_s3_bucket="b",
        files_s3_endpoint="ftp://s3.example.org",
    )
