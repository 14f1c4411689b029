"""Settings: parsed once, from ARBITER_* environment variables and CLI flags,
into one frozen object that is passed down. Imports nothing of ours but the
storage URL helpers and the repository policy's parser, so any module may
depend on it without cycles.

The two concurrency constants of the seeds live here:
THREADPOOL_TOKENS sizes anyio's default thread limiter (applied at start-up),
TASK_SEMAPHORE_SIZE caps how many request_task calls may hold a token at once.
"""

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from arbiter.protocol.books import CATALOGUE_BOOKS_URL
from arbiter.protocol.repo_policy import parse_allow
from arbiter.storage.engine import normalize_url, sqlite_url

THREADPOOL_TOKENS = 200
TASK_SEMAPHORE_SIZE = 5
# ms late the event loop's timer may run before worker calls are turned away
# (web/overload.py): the loop then has that much work queued; a hiccup is less.
OVERLOAD_LAG_MS = 500

ENV_PREFIX = "ARBITER_"


def half_the_cpus() -> int:
    """Half the CPUs this process may run on, at least one: argon2 calls at once by
    default, so a flood of password guesses never takes every core from the
    event loop (on one core it shares it)."""
    return max(1, len(os.sched_getaffinity(0)) // 2)


Role = Literal["primary", "secondary", "standby"]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


# Settings where 0 has a meaning of its own, and below it none.
_ZERO_MEANS = {
    "max_connections": "automatic",
    "max_connections_per_address": "automatic",
    "overload_lag_ms": "never shed",
    "upload_quota_files": "no bound",
    "upload_quota_bytes": "no bound",
    "query_seconds": "no bound",
    "pgn_retention_days": "keep every PGN",
    "signup_expiry_days": "keep every signup",
    "signup_proof_of_work": "no proof asked",
    "health_min_runs": "no quarantine",
}


class SettingsError(ValueError):
    """A setting has a value we cannot use; the message names it."""


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Path("arbiter-data")
    database_url: str = ""  # empty: the SQLite file inside data_dir
    role: Role = "primary"
    threadpool_tokens: int = THREADPOOL_TOKENS
    task_semaphore_size: int = TASK_SEMAPHORE_SIZE
    # Places of that gate one account may hold at once; 0: half of them, at least 1.
    task_semaphore_per_account: int = 0
    # Request bodies: the API and forms, and the larger limit for net uploads.
    max_body_bytes: int = 2 * 1024 * 1024
    max_upload_bytes: int = 200 * 1024 * 1024
    # Uploads one account may make in any 24 hours, nets and books together
    # (domain/files/upload_quota.py); 0 lifts either bound.
    upload_quota_files: int = 50
    upload_quota_bytes: int = 5 * 1024**3
    # Connection limits (web/connection_limits.py): request head size and count
    # (431 beyond), seconds to send the head, a body period and the rate that
    # earns another, and open connections (0: the file-descriptor limit less 512).
    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    header_timeout_seconds: int = 20
    body_timeout_seconds: int = 30
    body_min_bytes_per_second: int = 16 * 1024
    max_connections: int = 0
    # One client address's share of them (an IPv6 /64 is one address; the
    # proxies of FORWARDED_ALLOW_IPS are not counted); 0: a twentieth, at least 100.
    max_connections_per_address: int = 0
    # Overload (web/overload.py): worker calls are answered "too busy" or 503 at
    # once while the event loop runs this many ms late; 0 never turns them away.
    overload_lag_ms: int = OVERLOAD_LAG_MS
    # Seconds the database lets one transaction made for a request run before
    # it stops it (storage/request_bounds.py); 0: no bound. Background jobs and
    # commands are not bounded.
    query_seconds: int = 15
    secret_key: str = ""  # empty: generated once and kept in the database
    # The key of the worker proofs (domain/credentials.py): a file that must
    # not live in the database; empty: data_dir/worker-proof.key, made on the
    # first start. Give every process that may serve the worker API the same.
    worker_proof_key_file: str = ""
    # The Ed25519 key that signs the worker package for the workers' self-update
    # (32 bytes in hex); empty: data_dir/worker-signing.key, made on the first
    # start. Every process that serves /api/worker/ must have the same file.
    worker_signing_key_file: str = ""
    session_days: int = 400  # remember-me lifetime, as the reference
    session_hours: int = 12  # lifetime of a session without remember-me
    # argon2id cost; defaults are OWASP's minimum. Raising them is safe: hashes
    # are upgraded at the next login.
    argon2_time_cost: int = 2
    argon2_memory_kib: int = 19456
    argon2_parallelism: int = 1
    # Password guessing (domain/password_guard.py), per process: failures free per
    # account and per client address, then waits doubling from 1 s up to the
    # ceiling, forgotten after a quiet spell; argon2 calls at once, callers that may
    # wait for one and for how long; signups per address per hour; keys remembered.
    password_account_free_failures: int = 5
    password_address_free_failures: int = 20
    password_max_delay_seconds: int = 900
    password_forget_seconds: int = 3600
    argon2_concurrency: int = field(default_factory=half_the_cpus)
    argon2_waiting: int = 8
    argon2_wait_ms: int = 500
    signups_per_address_per_hour: int = 5
    # The signup form's proof of work (domain/accounts/signup_proof.py): the
    # browser hashes about three quarters of this many times (under a second).
    signup_proof_of_work: int = 1_000_000
    throttle_entries: int = 100_000
    secure_cookies: bool = False  # set behind HTTPS
    base_url: str = ""  # public URL, for links in messages; empty: from the request
    log_level: str = "info"
    # One line per request on the `arbiter.access` logger (web/access_log.py).
    access_log: bool = True
    # Background jobs (primary only); ARBITER_JOBS=0 turns them off, e.g. in tests.
    jobs: bool = True
    # Approvers may approve their own runs (domain/runs/approval.py); without it
    # only an instance with a single active approver allows that.
    allow_self_approval: bool = False
    # Webhooks (domain/webhooks.py): how often the job sends what is due, and
    # whether hooks may reach private, loopback or link-local addresses.
    webhook_period_seconds: int = 5
    webhook_allow_private: bool = False
    # Upkeep (jobs/table.py): task PGNs are deleted this many days after their
    # upload (0: kept forever), and signups no approver accepted within this
    # many days are removed, with a reject_user action (0: kept). Both are off
    # until the operator asks: an imported Fishtest history holds years of both.
    pgn_retention_days: int = 0
    signup_expiry_days: int = 0
    # Machine health (domain/health.py, domain/quarantine.py): a machine is
    # quarantined on evidence from this many runs of this many authors, among
    # the runs changed within the window; 0 runs: no quarantine.
    health_min_runs: int = 3
    health_min_authors: int = 2
    health_window_days: int = 14
    # How often a primary checks it still holds its lease (web/lease.py).
    lease_check_seconds: int = 5
    # Reading submitted repositories (domain/repos/, docs/operations.md "Git"):
    # what the URL policy lets through besides public https, ssh URLs, the git
    # executor's threads and the share one account may hold, the timeout of one
    # remote git call, the Retry-After of a refusal, the mirror cache's cap, how
    # deep histories are fetched, the diff kept per run, the official repository
    # whose master the ancestry and bench checks use (empty: no such checks).
    git_allow: str = ""
    git_ssh: bool = False
    git_threads: int = 8
    git_per_account: int = 2
    git_timeout_seconds: int = 20
    git_retry_after_seconds: int = 10
    git_cache_mib: int = 2048
    git_max_depth: int = 4096
    git_diff_kib: int = 512
    git_official_repo: str = ""
    # Who may read /metrics: addresses or networks, comma-separated.
    metrics_allow: str = "127.0.0.1,::1"
    # Log lines as text (one line, for a terminal) or JSON objects (for a collector).
    log_format: str = "text"
    # Nets' and books' bytes in an S3-compatible bucket instead of the database
    # (domain/files/bucket_files.py): set the bucket to use one. Without a key
    # and secret, boto3's own chain (AWS_* variables, ~/.aws, an instance role).
    files_s3_bucket: str = ""
    files_s3_endpoint: str = ""  # e.g. https://minio.example.org:9000; empty: AWS
    files_s3_region: str = ""
    files_s3_access_key_id: str = ""
    files_s3_secret_access_key: str = ""
    files_s3_secret_access_key_file: str = ""  # the secret read from this file instead
    files_s3_prefix: str = ""  # before every key, e.g. "arbiter/"
    # Where workers fetch the catalogue's books (the official worker: always the
    # official repository). The primary tries it every 10 minutes, and while it
    # cannot fetch the default book there, new runs get the shipped book
    # (domain/files/books.py); empty: no check, the catalogue's default.
    books_url: str = CATALOGUE_BOOKS_URL
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_primary(self) -> bool:
        return self.role == "primary"

    @property
    def metrics_networks(self) -> tuple[Network, ...]:
        return parse_networks(self.metrics_allow)

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return normalize_url(self.database_url)
        return sqlite_url(self.data_dir)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        """Read ARBITER_<NAME> variables, then apply explicit overrides (CLI flags)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for spec in fields(cls):
            raw = environ.get(ENV_PREFIX + spec.name.upper())
            if raw is not None and spec.name != "extra":
                values[spec.name] = _convert(spec.name, raw, type(getattr(cls(), spec.name)))
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)
        settings.validate()
        return settings

    def with_changes(self, **changes: Any) -> "Settings":
        changed = replace(self, **changes)
        changed.validate()
        return changed

    def validate(self) -> None:
        if self.role not in ("primary", "secondary", "standby"):
            raise SettingsError(
                f"ARBITER_ROLE must be primary, secondary or standby, not {self.role!r}"
            )
        positive = ("port", "threadpool_tokens", "task_semaphore_size", "max_body_bytes")
        limits = ("max_header_bytes", "max_headers", "header_timeout_seconds")
        for name in (*positive, *limits, "body_timeout_seconds", "body_min_bytes_per_second"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"ARBITER_{name.upper()} must be positive")
        for name in (
            "health_min_authors",
            "health_window_days",
            "webhook_period_seconds",
            "lease_check_seconds",
        ):
            if getattr(self, name) <= 0:
                raise SettingsError(f"ARBITER_{name.upper()} must be positive")
        if self.log_format not in ("text", "json"):
            raise SettingsError(f"ARBITER_LOG_FORMAT must be text or json, not {self.log_format!r}")
        try:
            parse_networks(self.metrics_allow)
        except ValueError as error:
            raise SettingsError(f"ARBITER_METRICS_ALLOW: {error}") from None
        for name, zero_means in _ZERO_MEANS.items():
            if getattr(self, name) < 0:
                raise SettingsError(f"ARBITER_{name.upper()} must be 0 ({zero_means}) or positive")
        self._validate_password_limits()
        self._validate_git()
        self._validate_books_url()
        self._validate_files_s3()
        if self.task_semaphore_size >= self.threadpool_tokens:
            raise SettingsError("ARBITER_TASK_SEMAPHORE_SIZE must be below THREADPOOL_TOKENS")
        if not 0 <= self.task_semaphore_per_account <= self.task_semaphore_size:
            raise SettingsError(
                "ARBITER_TASK_SEMAPHORE_PER_ACCOUNT must be 0 (half the gate)"
                " to ARBITER_TASK_SEMAPHORE_SIZE"
            )

    def _validate_files_s3(self) -> None:
        others = (
            "files_s3_endpoint",
            "files_s3_region",
            "files_s3_access_key_id",
            "files_s3_secret_access_key",
            "files_s3_secret_access_key_file",
            "files_s3_prefix",
        )
        named = [f"ARBITER_{name.upper()}" for name in others if getattr(self, name)]
        if named and not self.files_s3_bucket:
            raise SettingsError(f"{named[0]} is set but ARBITER_FILES_S3_BUCKET is not")
        if self.files_s3_secret_access_key and self.files_s3_secret_access_key_file:
            raise SettingsError(
                "ARBITER_FILES_S3_SECRET_ACCESS_KEY and ..._SECRET_ACCESS_KEY_FILE:"
                " give the secret one way"
            )
        secret = self.files_s3_secret_access_key or self.files_s3_secret_access_key_file
        if bool(self.files_s3_access_key_id) != bool(secret):
            raise SettingsError(
                "ARBITER_FILES_S3_ACCESS_KEY_ID and its secret go together (or neither:"
                " boto3's own credentials)"
            )
        if self.files_s3_endpoint and not self.files_s3_endpoint.startswith(
            ("http://", "https://")
        ):
            raise SettingsError("ARBITER_FILES_S3_ENDPOINT must be an http:// or https:// URL")

    def _validate_books_url(self) -> None:
        if self.books_url and not self.books_url.startswith(("http://", "https://")):
            raise SettingsError(f"ARBITER_BOOKS_URL must be an http(s) URL, not {self.books_url!r}")

    def _validate_git(self) -> None:
        positive = (
            "git_threads",
            "git_per_account",
            "git_timeout_seconds",
            "git_retry_after_seconds",
            "git_cache_mib",
            "git_max_depth",
            "git_diff_kib",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise SettingsError(f"ARBITER_{name.upper()} must be positive")
        try:
            parse_allow(self.git_allow)
        except ValueError as error:
            raise SettingsError(str(error)) from None

    def _validate_password_limits(self) -> None:
        positive = (
            "password_max_delay_seconds",
            "argon2_concurrency",
            "argon2_wait_ms",
            "signups_per_address_per_hour",
            "throttle_entries",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise SettingsError(f"ARBITER_{name.upper()} must be positive")
        for name in ("password_account_free_failures", "password_address_free_failures"):
            if getattr(self, name) < 0:
                raise SettingsError(f"ARBITER_{name.upper()} must be 0 or more")
        if self.argon2_waiting < 0:
            raise SettingsError("ARBITER_ARGON2_WAITING must be 0 or more")
        if self.password_forget_seconds < self.password_max_delay_seconds:
            raise SettingsError(
                "ARBITER_PASSWORD_FORGET_SECONDS must be at least"
                " ARBITER_PASSWORD_MAX_DELAY_SECONDS"
            )


def parse_networks(text: str) -> tuple[Network, ...]:
    """Addresses or networks, comma-separated; ValueError names a bad one."""
    networks = []
    for part in text.split(","):
        item = part.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an address or network") from None
    return tuple(networks)


def _convert(name: str, raw: str, kind: type) -> Any:
    try:
        if kind is bool:
            return _parse_bool(raw)
        if kind is int:
            return int(raw)
        if kind is Path or issubclass(kind, Path):
            return Path(raw)
    except ValueError as error:
        raise SettingsError(f"{ENV_PREFIX}{name.upper()}: {error}") from None
    return raw


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected a boolean, got {raw!r}")
