"""The job table: its rows, and each job doing its work on a real database
(both backends, through the `engine` fixture)."""

import threading

from argon2 import PasswordHasher, Type
from sqlalchemy import Engine

from arbiter.domain.accounts import Accounts
from arbiter.domain.credentials import digest
from arbiter.domain.runs.service import Runs
from arbiter.jobs.scheduler import Job, JobScheduler
from arbiter.jobs.table import job_table
from arbiter.storage import Storage

PASSWORD = "correct horse battery staple 1729"
HOUR = 3600.0


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
        "scavenge_dead_tasks": (60, 60, 0.05),
        "refresh_run_rates": (60, 60, 0.05),
    }
    JobScheduler(rows.values()).stop()  # names are unique: the scheduler accepts the table


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
