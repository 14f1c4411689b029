"""The job table: its rows, and each job doing its work on a real database
(both backends, through the `engine` fixture)."""

import gzip
import hashlib
import threading
from pathlib import Path

from argon2 import PasswordHasher, Type
from sqlalchemy import Engine

from arbiter.domain.accounts import Accounts
from arbiter.domain.credentials import digest
from arbiter.domain.files.nets import NetLibrary
from arbiter.domain.files.pgns import PgnArchive
from arbiter.domain.quarantine import MachineHealth
from arbiter.domain.runs.registry import LEASE_SECONDS
from arbiter.domain.runs.service import Runs
from arbiter.jobs.scheduler import Job, JobScheduler
from arbiter.jobs.table import DOWNLOAD_FLUSH_PERIOD, job_table, secondary_job_table
from arbiter.storage import Storage
from tests.domain.files.support import stage

OFFICIAL_WORKER_BEAT = 120.0  # worker.py's heartbeat: after 120 s without contact
PASSWORD = "correct horse battery staple 1729"
HOUR = 3600.0
NET = b"NNUE" + bytes(range(256)) * 16


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def cheap_accounts(storage: Storage, clock: Clock) -> Accounts:
    hasher = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID)
    return Accounts(storage, hasher=hasher, clock=clock, session_hours=12, remember_days=400)


def table(storage: Storage, clock: Clock) -> list[Job]:
    runs = Runs(storage, task_gate=threading.Semaphore(5), clock=clock)
    return job_table(accounts=cheap_accounts(storage, clock), runs=runs)


def test_the_table_follows_the_reference_periods(engine: Engine) -> None:
    rows = {job.name: job for job in table(Storage(engine), Clock())}
    periods = {name: (job.period, job.initial_delay, job.jitter) for name, job in rows.items()}
    assert periods == {
        "purge_expired_sessions": (3600, 60, 0.05),
        "scavenge_dead_tasks": (30, 30, 0.05),
        "refresh_run_rates": (60, 60, 0.05),
    }
    JobScheduler(rows.values()).stop()  # names are unique: the scheduler accepts the table


def test_the_upkeep_jobs_run_when_their_settings_ask(engine: Engine) -> None:
    """Stale signups and old PGNs are removed by jobs of their own, hourly, when
    the operator's settings give them a number of days; machine health is
    checked every ten minutes."""
    storage, clock = Storage(engine), Clock()
    accounts = cheap_accounts(storage, clock)
    runs = Runs(storage, task_gate=threading.Semaphore(5), clock=clock)
    archive = PgnArchive(storage, clock)
    health = MachineHealth(storage, take_back=runs.take_back_task_of, changed=lambda: None)
    rows = job_table(
        accounts=accounts,
        runs=runs,
        pgns=archive,
        pgn_retention_days=7,
        signup_expiry_days=30,
        health=health,
    )
    periods = {job.name: (job.period, job.initial_delay) for job in rows}
    assert periods["check_machine_health"] == (600, 600)
    assert periods["remove_stale_signups"] == (HOUR, 300)
    assert periods["expire_pgns"] == (HOUR, 600)
    accounts.signup("idle", PASSWORD, "idle@example.org")
    archive.store("0123456789abcdef01234567", 0, gzip.compress(b"1-0"))
    clock.now += 31 * 24 * HOUR
    scheduler = JobScheduler(rows)
    try:
        for name in ("remove_stale_signups", "expire_pgns", "check_machine_health"):
            status = scheduler.run_now(name).result(timeout=30)
            assert (status.runs, status.last_error) == (1, None)
    finally:
        scheduler.stop()
    assert accounts.get_user("idle") is None
    with storage.read() as tx:
        assert tx.pgns.list_for_run("0123456789abcdef01234567") == []


def test_a_vanished_workers_task_is_reclaimed_within_240_s(engine: Engine) -> None:
    """A task is reclaimed by the first check after its lease ends; the official
    worker's beat (every 120 s without an update) renews it well before."""
    check = next(
        job for job in table(Storage(engine), Clock()) if job.name == "scavenge_dead_tasks"
    )
    assert OFFICIAL_WORKER_BEAT < LEASE_SECONDS
    assert LEASE_SECONDS + check.period * (1 + check.jitter) <= 240


def test_run_jobs_run_without_errors(engine: Engine) -> None:
    scheduler = JobScheduler(table(Storage(engine), Clock()))
    try:
        for name in ("scavenge_dead_tasks", "refresh_run_rates"):
            status = scheduler.run_now(name).result(timeout=30)
            assert (status.runs, status.last_error) == (1, None)
    finally:
        scheduler.stop()


def test_session_purge_deletes_expired_sessions_only(engine: Engine) -> None:
    storage, clock = Storage(engine), Clock()
    accounts = cheap_accounts(storage, clock)
    user = accounts.create_user("alice", PASSWORD, email="alice@example.org")
    short = accounts.start_session(user, remember=False)  # 12 hours
    remembered = accounts.start_session(user, remember=True)  # 400 days
    clock.now += 13 * HOUR
    with storage.read() as tx:
        assert tx.sessions.get(digest(short.session_id)) is not None  # expired, still stored

    runs = Runs(storage, task_gate=threading.Semaphore(5), clock=clock)
    scheduler = JobScheduler(job_table(accounts=accounts, runs=runs))
    try:
        status = scheduler.run_now("purge_expired_sessions").result(timeout=30)
    finally:
        scheduler.stop()

    assert (status.runs, status.last_error) == (1, None)
    with storage.read() as tx:
        assert tx.sessions.get(digest(short.session_id)) is None
        assert tx.sessions.get(digest(remembered.session_id)) is not None
    assert accounts.resolve_session(remembered.session_id) is not None


def test_flush_download_counts_writes_what_the_nets_counted(engine: Engine, tmp_path: Path) -> None:
    storage, clock = Storage(engine), Clock()
    nets = NetLibrary(storage, clock)
    name = f"nn-{hashlib.sha256(NET).hexdigest()[:12]}.nnue"
    nets.add("alice", name, stage(tmp_path, NET))
    runs = Runs(storage, task_gate=threading.Semaphore(5), clock=clock)
    jobs = job_table(accounts=cheap_accounts(storage, clock), runs=runs, nets=nets)
    flush = next(job for job in jobs if job.name == "flush_download_counts")
    assert (flush.period, flush.initial_delay) == (DOWNLOAD_FLUSH_PERIOD, DOWNLOAD_FLUSH_PERIOD)
    assert [job.name for job in secondary_job_table(nets=nets)] == ["flush_download_counts"]

    for _ in range(5):
        nets.open_for_download(name)
    scheduler = JobScheduler(jobs)
    try:
        status = scheduler.run_now("flush_download_counts").result(timeout=30)
    finally:
        scheduler.stop()
    assert (status.runs, status.last_error) == (1, None)
    with storage.read() as tx:
        stored = tx.nets.get(name)
    assert stored is not None
    assert stored.downloads == 5
