"""The one table of background jobs: what runs on the primary, and how often.

Periods and initial delays follow the reference scheduler (fishtest-reference
§7.1) where it has the job, except the reclaim of silent tasks, checked twice
as often; each gets ±5% jitter. Every function here runs in
the job executor, never in the request threadpool. To add a job, add a row
(and the service it needs as a keyword argument).

A secondary runs no upkeep, but it serves downloads too: it runs
`secondary_job_table`, whose only job writes the downloads it counted.
"""

from arbiter.domain.accounts import Accounts
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.files.nets import NetLibrary
from arbiter.domain.files.pgns import PgnArchive
from arbiter.domain.quarantine import MachineHealth
from arbiter.domain.runs.registry import RECLAIM_CHECK_SECONDS
from arbiter.domain.runs.service import Runs
from arbiter.domain.webhooks import Webhooks
from arbiter.jobs.scheduler import Job

MINUTE = 60.0
HOUR = 3600.0
# How long net downloads are counted in memory before one transaction writes them.
DOWNLOAD_FLUSH_PERIOD = 30.0
WEBHOOK_PERIOD = 5.0  # ARBITER_WEBHOOK_PERIOD_SECONDS


def job_table(
    *,
    accounts: Accounts,
    runs: Runs,
    books: BookLibrary | None = None,
    nets: NetLibrary | None = None,
    webhooks: Webhooks | None = None,
    webhook_period: float = WEBHOOK_PERIOD,
    pgns: PgnArchive | None = None,
    pgn_retention_days: int = 0,
    health: MachineHealth | None = None,
    signup_expiry_days: int = 0,
) -> list[Job]:
    """Every job of a primary, bound to the services it calls. [any thread; builds only]"""
    jobs = [
        # Tasks silent past their lease go back to the pool (their games are re-offered).
        Job(
            "scavenge_dead_tasks",
            period=RECLAIM_CHECK_SECONDS,
            initial_delay=RECLAIM_CHECK_SECONDS,
            function=runs.scavenge,
        ),
        # itp, nps and games per minute of live runs: scheduling order and the dashboard.
        Job("refresh_run_rates", period=MINUTE, initial_delay=MINUTE, function=runs.refresh_rates),
        Job(
            "purge_expired_sessions",
            period=HOUR,
            initial_delay=MINUTE,
            function=accounts.purge_expired_sessions,
        ),
    ]
    if signup_expiry_days > 0:
        # Signups nobody accepted within ARBITER_SIGNUP_EXPIRY_DAYS.
        jobs.append(
            Job(
                "remove_stale_signups",
                period=HOUR,
                initial_delay=5 * MINUTE,
                function=lambda: accounts.remove_stale_signups(signup_expiry_days),
            )
        )
    if health is not None:
        # Machines that spoil results, on evidence across runs (domain/quarantine.py).
        jobs.append(
            Job(
                "check_machine_health",
                period=10 * MINUTE,
                initial_delay=10 * MINUTE,
                function=health.check,
            )
        )
    if pgns is not None and pgn_retention_days > 0:
        # Task PGNs past ARBITER_PGN_RETENTION_DAYS, oldest first, in batches.
        jobs.append(
            Job(
                "expire_pgns",
                period=HOUR,
                initial_delay=10 * MINUTE,
                function=lambda: pgns.expire(pgn_retention_days),
            )
        )
    if books is not None:
        # A catalogue imported by `arbiter books import-catalogue` (another process).
        jobs.append(
            Job(
                "reload_book_catalogue",
                period=MINUTE,
                initial_delay=MINUTE,
                function=books.reload_catalogue,
            )
        )
        # Whether workers can fetch the catalogue's books: offline, new runs
        # default to the book Arbiter ships (the first check runs at once).
        jobs.append(
            Job(
                "check_catalogue_fetchable",
                period=10 * MINUTE,
                initial_delay=0.0,
                function=books.check_catalogue_fetchable,
            )
        )
    if nets is not None:
        jobs.append(flush_download_counts(nets))
    if webhooks is not None:
        # New run events into deliveries, then the POSTs that are due (with retries).
        jobs.append(
            Job(
                "deliver_webhooks",
                period=webhook_period,
                initial_delay=webhook_period,
                function=webhooks.run,
            )
        )
    return jobs


def secondary_job_table(*, nets: NetLibrary) -> list[Job]:
    """A secondary's jobs: only writing the downloads it served. [builds only]"""
    return [flush_download_counts(nets)]


def flush_download_counts(nets: NetLibrary) -> Job:
    # Downloads are counted in memory; one transaction writes them (and shutdown does).
    return Job(
        "flush_download_counts",
        period=DOWNLOAD_FLUSH_PERIOD,
        initial_delay=DOWNLOAD_FLUSH_PERIOD,
        function=nets.flush_downloads,
    )
