"""Opening the process's state at start-up, and the storage of offline commands.
Runs in the threadpool (blocking I/O)."""

import argparse
import contextlib
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from argon2 import PasswordHasher, Type
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from arbiter.domain.accounts import Accounts
from arbiter.domain.accounts.signup_proof import SignupProofs
from arbiter.domain.actions import Actions
from arbiter.domain.credentials import WorkerProofs
from arbiter.domain.files import worker_package
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.files.bucket_files import BucketFiles
from arbiter.domain.files.nets import NetLibrary
from arbiter.domain.files.pgns import PgnArchive
from arbiter.domain.files.stored import DatabaseFiles, FileStore
from arbiter.domain.files.upload_quota import UploadQuota
from arbiter.domain.follows import Follows
from arbiter.domain.health import HealthRules
from arbiter.domain.password_guard import PasswordGuard, PasswordLimits
from arbiter.domain.quarantine import MachineHealth
from arbiter.domain.repos.cache import RepoCache
from arbiter.domain.repos.reading import CodeReader, GitLimits
from arbiter.domain.repos.work import GitWork
from arbiter.domain.runs import contribution_totals
from arbiter.domain.runs.admission import AdmissionGate, fair_share
from arbiter.domain.runs.approval import ApprovalPolicy
from arbiter.domain.runs.code_args import CodeSource
from arbiter.domain.runs.service import Runs
from arbiter.domain.webhooks import Webhooks
from arbiter.jobs import Job, JobScheduler, job_table
from arbiter.jobs.table import secondary_job_table
from arbiter.protocol.repo_policy import RepoPolicy, parse_allow
from arbiter.runtime.settings import Settings, SettingsError
from arbiter.runtime.state import AppState
from arbiter.storage import Storage
from arbiter.storage.engine import describe_url, make_engine, probe
from arbiter.storage.lease import PrimaryLease
from arbiter.storage.migrate import SchemaStatus, schema_status, upgrade
from arbiter.storage.object_store import Bucket, BucketSettings
from arbiter.storage.repo_locks import repo_locks

log = logging.getLogger("arbiter")

SECRET_KEY_NAME = "session_secret"  # noqa: S105 - the kv key, not the secret

# Builds the jobs a primary runs from its state; create_app takes another in tests.
JobTable = Callable[[AppState], Sequence[Job]]


def prepare_database(engine: Engine, *, secondary: bool = False) -> bool:
    """Migrate an empty database; refuse to run on a schema of another version,
    except that a secondary serves on a newer schema that says this code may
    (expand, then contract: storage/migrate.py). True when created just now."""
    status = schema_status(engine)
    if status.state == "current":
        return False
    if status.state == "empty":
        log.info("empty database: applying migrations")
        upgrade(engine)
        return True
    if status.state == "newer_compatible" and secondary:
        log.warning(
            "the database schema is at revision %s, newer than this Arbiter's %s; it is "
            "compatible, so this secondary serves: upgrade it soon",
            status.current,
            status.head,
        )
        return False
    raise SettingsError(schema_refusal(status))


def schema_refusal(status: SchemaStatus) -> str:
    where = f"the database schema is at revision {status.current}, this Arbiter needs {status.head}"
    if status.state == "behind":
        return f"{where}: run `arbiter db upgrade` first"
    if status.state == "newer_compatible":
        return f"{where}: a primary must run the Arbiter of its schema (secondaries may lag)"
    return f"{where}: the database is newer than this Arbiter; upgrade Arbiter"


@dataclass(frozen=True, slots=True)
class OpenedDatabase:
    """What `serve` tells the operator about the database it opened, so a
    mistyped data dir or URL (a new, empty database) is seen at once."""

    where: str  # "SQLite /path/arbiter.sqlite3" or "PostgreSQL postgresql://..."
    created: bool
    runs: int

    def summary(self) -> str:
        if self.created:
            return f"{self.where} (created now)"
        return f"{self.where} (existing, {self.runs} run{'' if self.runs == 1 else 's'})"


def open_database(settings: Settings, lease: PrimaryLease | None) -> OpenedDatabase:
    """`serve`'s start-up before the event loop: take the primary's lease (before
    anything is touched), check the database answers, migrate an empty one.
    Blocking. Raises LeaseHeld, DatabaseNotOpened, SettingsError."""
    engine = make_engine(settings.resolved_database_url, pool_size=1)
    try:
        if lease is not None:
            lease.acquire()
        probe(engine)
        created = prepare_database(engine, secondary=not settings.is_primary)
        storage = Storage(engine)
        if settings.is_primary and not contribution_totals.built(storage):
            if not created:  # an upgrade cut short: `db upgrade` builds them
                log.warning("building contributor totals from every task (once, slow)")
            contribution_totals.rebuild(storage)
        with storage.read() as tx:
            runs = tx.contributions.tests()  # a row a user, not a scan of the runs
        url = engine.url
        if url.get_backend_name() == "sqlite":
            where = f"SQLite {url.database}"
        else:
            where = f"PostgreSQL {describe_url(url.render_as_string(hide_password=False))}"
        return OpenedDatabase(where=where, created=created, runs=runs)
    finally:
        engine.dispose()


def load_secret_key(storage: Storage, configured: str) -> str:
    """ARBITER_SECRET_KEY if set, else one generated on first start and kept in
    the database, so every process sharing the database signs cookies alike."""
    if configured:
        return configured
    with storage.write() as tx:
        existing = tx.kv.get(SECRET_KEY_NAME)
        if isinstance(existing, str) and existing:
            return existing
        generated = secrets.token_hex(32)
        tx.kv.set(SECRET_KEY_NAME, generated)
        return generated


def password_hasher(settings: Settings) -> PasswordHasher:
    return PasswordHasher(
        time_cost=settings.argon2_time_cost,
        memory_cost=settings.argon2_memory_kib,
        parallelism=settings.argon2_parallelism,
        type=Type.ID,
    )


def password_limits(settings: Settings) -> PasswordLimits:
    return PasswordLimits(
        account_free_failures=settings.password_account_free_failures,
        address_free_failures=settings.password_address_free_failures,
        max_delay_seconds=settings.password_max_delay_seconds,
        forget_seconds=settings.password_forget_seconds,
        argon2_concurrency=settings.argon2_concurrency,
        argon2_waiting=settings.argon2_waiting,
        argon2_wait_seconds=settings.argon2_wait_ms / 1000,
        signups_per_address_per_hour=settings.signups_per_address_per_hour,
        throttle_entries=settings.throttle_entries,
    )


def make_accounts(
    storage: Storage, settings: Settings, proofs: WorkerProofs | None = None
) -> Accounts:
    """The accounts service; `proofs` None keeps worker proofs for this process
    only (a command that verifies no worker needs no key)."""
    return Accounts(
        storage,
        hasher=password_hasher(settings),
        session_hours=settings.session_hours,
        remember_days=settings.session_days,
        guard=PasswordGuard(password_limits(settings)),
        worker_proofs=proofs,
    )


WORKER_PROOF_KEY_FILE = "worker-proof.key"
WORKER_SIGNING_KEY_FILE = "worker-signing.key"
KEY_BYTES = 32


def load_worker_proofs(settings: Settings) -> WorkerProofs:
    """The worker proofs under the key of ARBITER_WORKER_PROOF_KEY_FILE, made on
    the first start (readable by this user alone) when the file is missing."""
    path = Path(settings.worker_proof_key_file or settings.data_dir / WORKER_PROOF_KEY_FILE)
    return WorkerProofs(_secret_key(path, "ARBITER_WORKER_PROOF_KEY_FILE"))


def worker_signing_key(settings: Settings) -> Ed25519PrivateKey:
    """The key that signs the worker package (ARBITER_WORKER_SIGNING_KEY_FILE),
    made on the first start (readable by this user alone) when the file is missing."""
    path = Path(settings.worker_signing_key_file or settings.data_dir / WORKER_SIGNING_KEY_FILE)
    name = "ARBITER_WORKER_SIGNING_KEY_FILE"
    seed = _secret_key(path, name)
    if len(seed) != KEY_BYTES:  # an Ed25519 key is made from exactly 32 bytes
        raise SettingsError(f"{name}: {path} does not hold a key of 32 bytes in hex")
    return worker_package.signing_key(seed)


def _secret_key(path: Path, name: str) -> bytes:
    """At least 32 random bytes kept in hex at `path` (32 made there when missing)."""
    try:
        if not path.exists():
            _make_key_file(path)
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
        if len(key) < KEY_BYTES:
            raise ValueError(path)
        return key
    except OSError as error:
        raise SettingsError(f"{name}: cannot read or create {path}: {error.strerror}") from None
    except ValueError:
        raise SettingsError(f"{name}: {path} does not hold a key of 32 bytes in hex") from None


def _make_key_file(path: Path) -> None:
    """A new random key at `path`, whole or not at all: written beside it, then
    linked into place, which fails if another process made it meanwhile (its
    key is then the one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as made:
            made.write(secrets.token_hex(KEY_BYTES) + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink(missing_ok=True)


def configured_bucket(settings: Settings) -> Bucket | None:
    """The object store of ARBITER_FILES_S3_*, None when files stay in the
    database. Builds a client and reaches nothing (see `check_files`)."""
    if not settings.files_s3_bucket:
        return None
    secret = settings.files_s3_secret_access_key
    if settings.files_s3_secret_access_key_file:
        path = settings.files_s3_secret_access_key_file
        try:
            secret = Path(path).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise SettingsError(
                f"ARBITER_FILES_S3_SECRET_ACCESS_KEY_FILE: cannot read {path}: {error.strerror}"
            ) from None
    return Bucket(
        BucketSettings(
            endpoint=settings.files_s3_endpoint,
            bucket=settings.files_s3_bucket,
            region=settings.files_s3_region,
            access_key_id=settings.files_s3_access_key_id,
            secret_access_key=secret,
            prefix=settings.files_s3_prefix,
        )
    )


def check_files(settings: Settings) -> None:
    """Reach the configured bucket with its credentials (start-up and `db upgrade`):
    ObjectStoreError (a StorageError) saying why not."""
    bucket = configured_bucket(settings)
    if bucket is not None:
        bucket.check()


def file_store(storage: Storage, settings: Settings) -> FileStore:
    """Where nets' and books' bytes go: the bucket when one is configured."""
    bucket = configured_bucket(settings)
    return DatabaseFiles(storage) if bucket is None else BucketFiles(storage, bucket)


def upload_quota(settings: Settings) -> UploadQuota:
    return UploadQuota(files=settings.upload_quota_files, size=settings.upload_quota_bytes)


def open_books(storage: Storage, settings: Settings, files: FileStore | None = None) -> BookLibrary:
    """The book library with its hashes loaded; the primary installs the shipped book."""
    quota = upload_quota(settings)
    books = BookLibrary(
        storage, settings.data_dir / "books", files=files, quota=quota, books_url=settings.books_url
    )
    books.load()
    if settings.is_primary and books.install_bundled():
        log.info("installed the default opening book")
    return books


def publish_worker_package(settings: Settings) -> worker_package.WorkerPackage:
    """The worker wheel of this server's own code, for the workers' self-update."""
    package = worker_package.publish(settings.data_dir, worker_signing_key(settings))
    log.info(
        "worker package %s (protocol %d, sha256 %s), signed by key %s",
        package.filename, package.protocol, package.sha256[:16], package.public_key,
    )  # fmt: skip
    return package


def code_source(settings: Settings) -> CodeSource:
    """How submissions read their commits: the URL policy, the mirror cache under
    the data dir (locked across processes; on PostgreSQL also across machines),
    the reader's limits and the bounded git executor."""
    policy = RepoPolicy(parse_allow(settings.git_allow), ssh=settings.git_ssh)
    timeout = float(settings.git_timeout_seconds)
    cache = RepoCache(
        settings.data_dir / "git-cache",
        max_bytes=settings.git_cache_mib * 1024 * 1024,
        lock_seconds=timeout * 3,
        shared_locks=repo_locks(settings.resolved_database_url),
    )
    limits = GitLimits(
        remote_seconds=timeout,
        max_depth=settings.git_max_depth,
        diff_max_bytes=settings.git_diff_kib * 1024,
    )
    reader = CodeReader(policy, cache, official_repo=settings.git_official_repo, limits=limits)
    work = GitWork(
        settings.git_threads,
        settings.git_per_account,
        retry_after=settings.git_retry_after_seconds,
    )
    return CodeSource(reader, work)


def open_state(settings: Settings, claim: Callable[[Storage], None] | None = None) -> AppState:
    """The process's state. `claim(storage)` marks the database as this
    primary's before the live runs are loaded (storage/lease_fence.py)."""
    engine = make_engine(settings.resolved_database_url, request_seconds=settings.query_seconds)
    try:
        prepare_database(engine, secondary=not settings.is_primary)
        storage = Storage(engine)
        if claim is not None:
            claim(storage)
        gate = threading.Semaphore(settings.task_semaphore_size)
        files = file_store(storage, settings)
        books = open_books(storage, settings, files)
        share = settings.task_semaphore_per_account or fair_share(settings.task_semaphore_size)
        # As many calls may wait for room at a full gate as it has places.
        fair_gate = AdmissionGate(gate, per_account=share, room_line=settings.task_semaphore_size)
        approval = ApprovalPolicy(allow_self=settings.allow_self_approval)
        code = code_source(settings)
        runs = Runs(storage, task_gate=fair_gate, books=books, approval=approval, code=code)
        if settings.is_primary:
            live = runs.restore()
            log.info("%d unfinished run(s) loaded", live)
        secret_key = load_secret_key(storage, settings.secret_key)
        return AppState(
            settings=settings,
            engine=engine,
            storage=storage,
            accounts=make_accounts(storage, settings, load_worker_proofs(settings)),
            actions=Actions(storage),
            secret_key=secret_key,
            signup_proofs=SignupProofs(secret_key, settings.signup_proof_of_work),
            health=machine_health(storage, runs, settings),
            runs=runs,
            pgns=PgnArchive(storage),
            nets=NetLibrary(storage, files=files, quota=upload_quota(settings)),
            books=books,
            task_semaphore=gate,
            worker_package=publish_worker_package(settings),
            follows=Follows(storage),
            webhooks=Webhooks(
                storage,
                base_url=settings.base_url,
                allow_private=settings.webhook_allow_private,
            ),
        )
    except BaseException:
        engine.dispose()
        raise


def default_jobs(state: AppState) -> list[Job]:
    """The job table (`arbiter.jobs.table`) bound to this process's services."""
    return job_table(
        accounts=state.accounts,
        runs=state.runs,
        books=state.books,
        nets=state.nets,
        webhooks=state.webhooks,
        webhook_period=float(state.settings.webhook_period_seconds),
        pgns=state.pgns,
        pgn_retention_days=state.settings.pgn_retention_days,
        health=state.health if state.settings.health_min_runs > 0 else None,
        signup_expiry_days=state.settings.signup_expiry_days,
    )


def machine_health(storage: Storage, runs: Runs, settings: Settings) -> MachineHealth:
    rules = HealthRules(min_runs=settings.health_min_runs, min_authors=settings.health_min_authors)
    return MachineHealth(
        storage,
        take_back=runs.take_back_task_of,
        changed=runs.blocked_machines.forget,
        rules=rules,
        window_days=settings.health_window_days,
    )


def start_jobs(state: AppState, table: JobTable) -> JobScheduler | None:
    """Build and start the job scheduler when jobs are enabled: `table` on a
    primary, only the download-count flush on a secondary (it serves downloads
    but no upkeep). Returns at once (jobs run in the scheduler's own executor)."""
    if not state.settings.jobs:
        return None
    jobs = table(state) if state.settings.is_primary else secondary_job_table(nets=state.nets)
    scheduler = JobScheduler(jobs)
    scheduler.start()
    return scheduler


def flush_before_close(state: AppState) -> None:
    """Write what is counted in memory (net downloads) before storage closes, so
    a clean stop loses no count. A failure is logged: closing goes on. [THREAD]"""
    try:
        written = state.nets.flush_downloads()
    except Exception:
        log.exception("could not write the download counts at shutdown")
        return
    if written:
        log.info("wrote %d counted download(s) at shutdown", written)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """A command's settings: the environment's, with its command-line options."""
    return Settings.from_env(
        data_dir=Path(args.data_dir) if getattr(args, "data_dir", None) else None,
        database_url=getattr(args, "database_url", None),
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        role=getattr(args, "role", None),
    )


@contextmanager
def open_storage(settings: Settings, *, migrate_empty: bool = True) -> Iterator[Storage]:
    """The database of an offline command (an import, an operator's command, a
    benchmark's fill), migrated if empty; disposed of on leaving."""
    engine = make_engine(settings.resolved_database_url, pool_size=2)
    try:
        probe(engine)
        if migrate_empty:
            prepare_database(engine)
        yield Storage(engine)
    finally:
        engine.dispose()
