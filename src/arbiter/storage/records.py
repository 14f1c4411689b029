"""Rows as plain frozen values: what the stores hand to the domain.

They mirror the tables in `schema.py` one to one, so a row maps onto a record
by column name and the domain never sees a SQLAlchemy object.
"""

from dataclasses import dataclass, fields
from typing import Any, TypeVar

import msgspec

from arbiter.storage.run_spec import RunSpec


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: int
    username: str
    username_key: str
    email: str
    password_hash: str
    registration_time: float
    pending: bool
    blocked: bool
    is_approver: bool
    tests_repo: str
    machine_limit: int
    credentials_version: int
    worker_proof: str | None = None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id_hash: str
    user_id: int
    created_at: float
    last_seen: float
    expires_at: float
    remember: bool
    csrf_token: str


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: int
    user_id: int
    label: str
    token_hash: str
    created_at: float
    last_used: float | None
    revoked_at: float | None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    id: int
    time: float
    action: str
    username: str
    run_id: str | None
    run: str | None
    task_id: int | None
    worker: str | None
    user: str | None
    message: str
    data: Any
    fishtest_id: str | None = None  # the ObjectId of an action imported from Fishtest


@dataclass(frozen=True, slots=True)
class WorkerBlockRecord:
    worker_name: str
    blocked: bool
    message: str
    last_updated: float


@dataclass(frozen=True, slots=True)
class MachineHealthRecord:
    """A machine's health over the health check's window, as it last found it.
    `record` holds counts (runs, authors, tasks, games, crashes, time_losses,
    failed, silent), the mean nps it reports and searched at (nps, game_nps)
    and `evidence`: the runs of each kind of finding against it."""

    worker_name: str
    username: str
    checked_at: float
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    worker_name: str
    active: bool
    since: float
    evidence: list[dict[str, str]]  # the findings: run_id, author, kind, detail
    dismissed: list[str]  # runs whose findings an approver set aside
    released_by: str = ""
    released_at: float | None = None


class RunRecord(msgspec.Struct, frozen=True, gc=False):
    """One run: its specification (`args`, the reference's name) and aggregates over its tasks.

    The run state (this and `TaskRecord`) is what a primary keeps in memory for
    a run's life, and every result update makes new ones. Both are structs the
    garbage collector does not track (`gc=False`): they hold plain values
    (strings, numbers, tuples, JSON-like dicts and lists) and never a reference
    cycle, and at 10,000 workers the collector walking tens of thousands of
    live task records was the longest pause the server had (the fleet benchmark,
    docs/benchmarks.md). A pentanomial is a tuple for the same reason: CPython
    stops tracking a tuple of numbers once it has survived a collection.
    """

    id: str
    version: int
    username: str
    start_time: float
    last_updated: float
    tc_base: float
    rescheduled_from: str | None
    approved: bool
    approver: str
    finished: bool
    deleted: bool
    failed: bool
    failures: int
    is_green: bool
    is_yellow: bool
    workers: int
    cores: int
    committed_games: int
    total_games: int
    wins: int
    losses: int
    draws: int
    crashes: int
    time_losses: int
    pentanomial: tuple[int, ...]
    nps: float
    games_per_minute: float
    args: RunSpec
    # The charts' fixed points (domain/runs/history.py), kept out of the args:
    # an SPRT run's args are rewritten with every result, these seldom.
    results_history: dict[str, Any] | None = None


class TaskRecord(msgspec.Struct, frozen=True, gc=False):
    """One task of a run: a block of games leased to one worker; stats are cumulative.

    Untracked by the collector, as `RunRecord` says why.
    """

    run_id: str
    task_id: int
    num_games: int
    start: int
    active: bool
    bad: bool
    last_updated: float
    username: str
    worker_name: str
    unique_key: str
    remote_addr: str
    worker_info: dict[str, Any]
    wins: int
    losses: int
    draws: int
    crashes: int
    time_losses: int
    pentanomial: tuple[int, ...]
    residual: float | None
    spsa_params: dict[str, Any] | None


def no_results() -> dict[str, Any]:
    """A task's result fields before its first game: a new task, or a purged one."""
    return {
        "wins": 0,
        "losses": 0,
        "draws": 0,
        "crashes": 0,
        "time_losses": 0,
        "pentanomial": (0, 0, 0, 0, 0),
    }


@dataclass(frozen=True, slots=True)
class UploadTally:
    """What one account uploaded since a time: how many files, their bytes, and
    when the oldest of them came (None when none did)."""

    files: int
    size: int
    oldest: float | None

    def __add__(self, other: "UploadTally") -> "UploadTally":
        times = [time for time in (self.oldest, other.oldest) if time is not None]
        return UploadTally(
            self.files + other.files, self.size + other.size, min(times, default=None)
        )


@dataclass(frozen=True, slots=True)
class NetRecord:
    name: str
    username: str
    sha256: str
    size: int
    uploaded_at: float
    downloads: int
    is_master: bool
    first_test: Any
    last_test: Any


@dataclass(frozen=True, slots=True)
class NetSearch:
    """Which nets a list shows: names containing a text, one uploader, master's only."""

    name_contains: str = ""
    username: str = ""
    master_only: bool = False


@dataclass(frozen=True, slots=True)
class BookRecord:
    name: str
    username: str
    sri: str
    size: int
    total: int
    uploaded_at: float


@dataclass(frozen=True, slots=True)
class PgnInfo:
    """A stored task PGN without its bytes (listing a run's archive)."""

    run_id: str
    task_id: int
    size: int
    uploaded_at: float


@dataclass(frozen=True, slots=True)
class RunEventRecord:
    id: int
    time: float
    event: str
    run_id: str  # "" for a machine's event
    action_id: int
    dispatched: bool
    worker: str = ""  # the machine, for a machine's event (quarantined)


@dataclass(frozen=True, slots=True)
class WebhookRecord:
    id: int
    username: str
    url: str
    events: str
    format: str
    secret: str
    all_runs: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    id: int
    hook_id: int
    event: str
    run_id: str
    body: str
    status: str
    attempts: int
    next_attempt_at: float
    last_code: int | None
    last_error: str
    created_at: float
    delivered_at: float | None
    worker: str = ""  # the machine, for a machine's event


R = TypeVar("R", RunRecord, TaskRecord, RunSpec)


def evolve(record: R, **changes: Any) -> R:
    """A copy of a run or task record or a run's spec with some fields changed (msgspec's
    `replace`, in C: a result update makes several of these)."""
    return msgspec.structs.replace(record, **changes)


def column_names(record_type: type[Any]) -> tuple[str, ...]:
    """The fields of a record type, which are its table's columns."""
    if issubclass(record_type, msgspec.Struct):
        return record_type.__struct_fields__
    return tuple(spec.name for spec in fields(record_type))
