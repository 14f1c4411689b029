"""The storage interfaces the domain codes against: one small Protocol per concern.

Every store is bound to one open transaction (see `sql.Storage`); none commits
by itself, so a domain operation and its audit action commit together or not
at all.
"""

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from arbiter.storage.action_search import ActionSearch
from arbiter.storage.records import (
    ActionRecord,
    BookRecord,
    MachineHealthRecord,
    NetRecord,
    NetSearch,
    PgnInfo,
    QuarantineRecord,
    RunRecord,
    SessionRecord,
    TaskRecord,
    TokenRecord,
    UploadTally,
    UserRecord,
    WorkerBlockRecord,
)

MAX_ACTIONS_PER_QUERY = 5000


@dataclass(frozen=True, slots=True)
class NewUser:
    username: str
    email: str
    password_hash: str
    registration_time: float
    pending: bool
    is_approver: bool = False
    tests_repo: str = ""


@dataclass(frozen=True, slots=True)
class NewAction:
    """One audit-log entry to append; the store gives it its id."""

    time: float
    action: str
    username: str
    message: str = ""
    run_id: str | None = None
    run: str | None = None
    task_id: int | None = None
    worker: str | None = None
    user: str | None = None
    data: Any = None


@dataclass(frozen=True, slots=True)
class ActionFilter:
    """The only ways the audit log can be searched: a whitelist, never raw queries.

    Results are newest first; `before` is exclusive (paging by time), and
    `max_count` is clamped to 1..MAX_ACTIONS_PER_QUERY so no caller can ask
    for the whole table.
    """

    action: str | None = None
    username: str | None = None
    run_id: str | None = None
    before: float | None = None
    max_count: int = 100

    @property
    def limit(self) -> int:
        return max(1, min(self.max_count, MAX_ACTIONS_PER_QUERY))


class UserStore(Protocol):
    def add(self, user: NewUser) -> UserRecord:
        """Raises DuplicateKey("username", ...) if the name is taken in any case."""
        ...

    def get(self, username: str) -> UserRecord | None: ...
    def get_by_key(self, username: str) -> UserRecord | None:
        """Case-insensitive lookup (through `username_key`)."""
        ...

    def get_by_id(self, user_id: int) -> UserRecord | None: ...
    def names_containing(self, text: str, limit: int) -> list[str]:
        """Usernames holding `text` in any case, those starting with it first, then
        by name; at most `limit`."""
        ...

    def list(
        self, *, pending: bool | None = None, blocked: bool | None = None
    ) -> list[UserRecord]: ...
    def pending_since_before(self, cutoff: float, limit: int) -> Sequence[UserRecord]:
        """Pending accounts registered before `cutoff`, oldest first, at most `limit`."""
        ...

    def set_pending(self, user_id: int, pending: bool) -> None: ...
    def set_blocked(self, user_id: int, blocked: bool) -> None:
        """Also bumps `credentials_version`: caches of verified secrets must die."""
        ...

    def set_password_hash(self, user_id: int, password_hash: str, *, new_secret: bool) -> None:
        """`new_secret` bumps `credentials_version` (a change, not a mere rehash)."""
        ...

    def replace_password_hash(self, user_id: int, old_hash: str, new_hash: str) -> bool:
        """Compare-and-set used for rehashing; False when the hash changed meanwhile."""
        ...

    def set_worker_proof(self, user_id: int, proof: str) -> None: ...

    def update_profile(
        self, user_id: int, *, email: str | None = None, tests_repo: str | None = None
    ) -> None: ...
    def delete(self, user_id: int) -> bool:
        """Deletes the user with its sessions and tokens."""
        ...


class SessionStore(Protocol):
    def add(self, session: SessionRecord) -> None: ...
    def get(self, id_hash: str) -> SessionRecord | None: ...
    def touch(self, id_hash: str, last_seen: float) -> None: ...
    def delete(self, id_hash: str) -> bool: ...
    def delete_for_user(self, user_id: int, *, keep_id_hash: str | None = None) -> int: ...
    def delete_expired(self, now: float) -> int: ...


class TokenStore(Protocol):
    def add(self, *, user_id: int, label: str, token_hash: str, created_at: float) -> TokenRecord:
        """Raises DuplicateKey("token", ...) on a hash collision."""
        ...

    def get_by_hash(self, token_hash: str) -> TokenRecord | None: ...
    def list_for_user(self, user_id: int) -> list[TokenRecord]: ...
    def touch(self, token_id: int, last_used: float) -> None: ...
    def revoke(self, *, user_id: int, token_id: int, at: float) -> bool:
        """False when the token does not exist or belongs to someone else."""
        ...

    def revoke_all(self, *, user_id: int, at: float) -> int:
        """Revokes every live token of the user; returns how many."""
        ...


class ActionStore(Protocol):
    def add(self, entry: NewAction) -> int: ...
    def query(self, action_filter: ActionFilter) -> list[ActionRecord]: ...
    def search(self, search: ActionSearch) -> list[ActionRecord]:
        """Raises SearchTooLong when its Python checks run past `search.scan_seconds`."""
        ...

    def worker_run_counts(self, action: str, since: float) -> dict[tuple[str, str], int]:
        """How many `action` entries each (worker, run) got since `since`."""
        ...

    def count(self, search: ActionSearch, cap: int) -> int:
        """How many actions a search without checks matches, counting no further
        than `cap` + 1 (more than `cap`: the log is millions of rows)."""
        ...


class KVStore(Protocol):
    """Small JSON documents by key (settings, caches that must survive restarts)."""

    def get(self, key: str) -> Any:
        """The stored value, or None when the key is absent."""
        ...

    def set(self, key: str, value: Any) -> None: ...
    def delete(self, key: str) -> bool: ...


class MachineHealthStore(Protocol):
    def put_many(self, records: Sequence[MachineHealthRecord]) -> None:
        """Insert or replace each machine's row."""
        ...

    def delete_checked_before(self, at: float) -> int:
        """Drop the rows an earlier check wrote (machines no longer seen); how many."""
        ...

    def get(self, worker_name: str) -> MachineHealthRecord | None: ...
    def of_user(self, username: str) -> list[MachineHealthRecord]:
        """The machines whose names start with this account's, by name."""
        ...


class QuarantineStore(Protocol):
    def get(self, worker_name: str) -> QuarantineRecord | None: ...
    def put(self, record: QuarantineRecord) -> None:
        """Insert or replace the machine's row."""
        ...

    def active(self) -> list[QuarantineRecord]:
        """The quarantines in force, newest first."""
        ...

    def all(self) -> list[QuarantineRecord]:
        """Every machine the rule ever quarantined (released ones too)."""
        ...


@dataclass(frozen=True, slots=True)
class MachineRunTotals:
    """A machine's tasks on one run, summed (every task, purged ones too: they
    are evidence)."""

    worker_name: str
    run_id: str
    author: str
    tasks: int
    games: int
    crashes: int
    time_losses: int
    pentanomial: tuple[int, int, int, int, int]
    last_updated: float = 0.0  # of its newest task there
    nps: float = 0.0  # reported (its bench), the mean of its tasks'
    game_nps: float = 0.0  # measured in its games by Arbiter's worker; 0: not measured


class WorkerBlockStore(Protocol):
    def get(self, worker_name: str) -> WorkerBlockRecord | None: ...
    def set(self, worker_name: str, *, blocked: bool, message: str, at: float) -> None: ...
    def list_blocked(self) -> list[WorkerBlockRecord]: ...


@dataclass(frozen=True, slots=True)
class FinishedRunFilter:
    """The ways finished runs can be listed (reference /api/finished_runs), newest first."""

    username: str | None = None
    success_only: bool = False
    failed_only: bool = False
    yellow_only: bool = False
    ltc_only: bool = False
    since: float | None = None
    # Part of the owner's name, any case (the finished tests search), among the
    # names of the contributor totals (everyone who ever submitted a run).
    user_contains: str = ""
    text: str = ""  # words of the owner, branches or description (storage/run_search.py)
    offset: int = 0  # `finished` only: the reference API's pages
    limit: int = 50
    before: str = ""  # `finished_slice`: the runs after this cursor (older ones)...
    after: str = ""  # ...or the runs before it (newer ones)


@dataclass(frozen=True, slots=True)
class FinishedSlice:
    """One page of a finished list, and the cursors of the pages beside it
    (None where there is none): stable links that cost what the first page does."""

    runs: list[RunRecord]
    newer: str | None
    older: str | None
    # The list's runs counted up to the bound asked for, when the page's own
    # query could count them (a search's first page); else None.
    counted: int | None = None


@dataclass(frozen=True, slots=True)
class TaskContribution:
    """Games one user's workers played for one run on one UTC day (the day of
    each task's last update): what contributor totals are rebuilt from."""

    username: str
    run_id: str
    day: int
    games: int
    last_updated: float


@dataclass(frozen=True, slots=True)
class RunCost:
    """What contributor totals need of a run: whose it is, when it was submitted,
    whether its games and its test count, and what a game of it costs."""

    run_id: str
    username: str
    start_time: float
    finished: bool
    deleted: bool
    tc: str
    threads: int


DAY_SECONDS = 86400  # a UTC day: contributor totals are kept per day


def day_of(seconds: float) -> int:
    """Days since 1970-01-01 UTC of a Unix time (what `Contribution.day` holds;
    storage/sql_runs.py `utc_day` says the same in SQL)."""
    return int(seconds // DAY_SECONDS)


@dataclass(frozen=True, slots=True)
class Contribution:
    """One user's totals (all time, or one UTC day, or summed over days), or a
    change to add to them (negative numbers take away)."""

    username: str
    games: int
    cpu_seconds: float
    tests: int
    last_active: float
    day: int = 0  # days since the Unix epoch (UTC); unused in all-time totals


class RunStore(Protocol):
    def updated_since(self, since: float, limit: int) -> Sequence[str]:
        """Ids of the runs (not deleted) changed since `since`, newest change first."""
        ...

    def add(self, run: RunRecord) -> None: ...
    def get(self, run_id: str) -> RunRecord | None: ...
    def save(self, run: RunRecord, stored: RunRecord | None = None) -> None:
        """Replace the stored row of `run.id` (aggregates, flags and args). Given the
        record the row holds now (`stored`), only the fields that are not the same
        objects in both are written."""
        ...

    def save_many(self, runs: list[tuple[RunRecord, RunRecord | None]]) -> None:
        """`save` of each (run, stored) pair, in as few statements as can be."""
        ...

    def unfinished(self) -> list[RunRecord]: ...
    def get_many(self, run_ids: list[str]) -> list[RunRecord]: ...
    def finished(self, run_filter: FinishedRunFilter) -> list[RunRecord]:
        """Finished runs, newest update first, from `offset` (a text search: newest
        submission first)."""
        ...

    def finished_slice(self, run_filter: FinishedRunFilter, count_up_to: int = 0) -> FinishedSlice:
        """A page of `finished` by keyset (`before`/`after`; `offset` unused).
        ValueError for a cursor this list did not make. With `count_up_to`, a
        search's first page also counts its list up to that bound, from the
        same reading of the text index."""
        ...

    def count_finished(self, run_filter: FinishedRunFilter, at_most: int) -> int:
        """How many finished runs the list holds, counted up to `at_most`."""
        ...

    def costs(self) -> Iterator[RunCost]:
        """Every run's `RunCost`, streamed: a full scan, for rebuilding contributor
        totals only."""
        ...


# Orders of a run's tasks table that SQL sorts (a residual order is the
# domain's: it depends on the χ² of the moment).
TaskOrder = Literal["task", "worker", "games", "updated", "crashes"]
# Per worker (short name): [WW+WD, LL+LD, DD+WL] pairs of its good tasks.
WorkerTotals = dict[str, tuple[float, float, float]]


@dataclass(frozen=True, slots=True)
class TaskLight:
    """What orders and filters a task in its run's table, without its documents."""

    task_id: int
    unique_key: str
    worker_name: str  # the short name, `user-Ncores-key1`
    modified: bool  # False unless asked for (`light_of_run(..., modified=True)`)
    games: int
    last_updated: float
    crashes: int
    time_losses: int


class TaskWorker(NamedTuple):
    """A task's machine (its short name): all the residual order needs."""

    task_id: int
    worker_name: str


class TaskStore(Protocol):
    def add(self, task: TaskRecord) -> None: ...
    def add_many(self, tasks: list[TaskRecord]) -> None:
        """`add` of each task, in one statement."""
        ...

    def get(self, run_id: str, task_id: int) -> TaskRecord | None: ...
    def save(self, task: TaskRecord, stored: TaskRecord | None = None) -> None:
        """Replace the stored row of the task; `stored` as for `RunStore.save`."""
        ...

    def save_many(self, tasks: list[tuple[TaskRecord, TaskRecord | None]]) -> None:
        """`save` of each (task, stored) pair, in as few statements as can be."""
        ...

    def for_run(self, run_id: str) -> list[TaskRecord]:
        """All tasks of a run, by task_id."""
        ...

    def for_runs(self, run_ids: list[str]) -> list[TaskRecord]: ...
    def deactivate_all(self, run_id: str, at: float) -> int:
        """Deactivate every active task of the run (it finished); returns how many."""
        ...

    def delete_for_run(self, run_id: str) -> None: ...
    def contributions(self) -> Iterator[TaskContribution]:
        """Games per (user, run, day of last update) over every task, streamed:
        a full scan, for rebuilding contributor totals only."""
        ...

    def active(self) -> list[TaskRecord]:
        """Every active task (the machines at work), by run and task id."""
        ...

    def machine_run_totals(self, run_ids: Sequence[str]) -> list[MachineRunTotals]:
        """Each machine's tasks on each of these runs, summed, with the run's author."""
        ...

    def machine_history(self, worker_name: str, limit: int) -> list[MachineRunTotals]:
        """One machine's runs, its tasks on each summed, the latest first (at most `limit`)."""
        ...

    def machine_seen(self, worker_names: Sequence[str]) -> bool:
        """Whether a task was ever given to a machine of one of these short names
        (an index probe)."""
        ...

    # A run's page: its good tasks paged and summed by the database.

    def page_of_run(
        self, run_id: str, order: TaskOrder, descending: bool, offset: int, limit: int
    ) -> list[TaskRecord]:
        """Good (not purged) tasks in that order (ties by task id), from `offset`."""
        ...

    def count_of_run(self, run_id: str) -> int:
        """How many good tasks the run has."""
        ...

    def light_of_run(self, run_id: str, *, modified: bool = False) -> list[TaskLight]:
        """Every good task's ordering fields, by task id (no documents decoded
        unless `modified`, the machine's flag, is asked for)."""
        ...

    def of_run_by_ids(self, run_id: str, task_ids: list[int]) -> list[TaskRecord]:
        """These tasks of the run, in the order given (unknown ids left out)."""
        ...

    def bad_of_run(self, run_id: str) -> list[TaskRecord]:
        """The run's purged tasks, by task id."""
        ...

    def workers_of_run(self, run_id: str) -> list[TaskWorker]:
        """Every good task's machine, by task id."""
        ...

    def page_by_machine_value(
        self,
        run_id: str,
        values: Mapping[str, float],
        missing: float,
        span: tuple[bool, int, int],
    ) -> list[TaskRecord]:
        """Good tasks ordered by their machine's value in `values` (`missing`
        for a machine without one; ties by task id), `span` being (descending,
        offset, limit): a run's page in an order kept outside the database (the
        χ² residual of the moment)."""
        ...

    def worker_totals(self, run_id: str) -> WorkerTotals:
        """The χ² table of the run's good tasks, summed per worker in the database."""
        ...

    def runs_with_tasks(self, at_least: int) -> list[str]:
        """The runs that have at least `at_least` tasks (a scan of every task)."""
        ...


@dataclass(frozen=True, slots=True)
class StoredChi2:
    """A run's χ² summary as a JSON document, and the stamp of the results it
    was computed from."""

    stamp: str
    summary: dict[str, Any]


class Chi2SummaryStore(Protocol):
    """Finished runs' workers' χ² summaries, one per run."""

    def get(self, run_id: str) -> StoredChi2 | None: ...

    def put(self, run_id: str, stored: StoredChi2) -> None:
        """Keep `stored` for the run, replacing what was kept."""
        ...


class ContributionStore(Protocol):
    """Contributor totals: per user all time, and per user and UTC day."""

    def add(self, changes: Iterable[Contribution]) -> None:
        """Add each change to its user's all-time row and to its (user, day) row;
        the last activity only ever moves forward."""
        ...

    def all_time(self) -> list[Contribution]: ...
    def of_user(self, username: str) -> Contribution | None:
        """The user's all-time row (exact name)."""
        ...

    def since(self, day: int) -> list[Contribution]:
        """Each user's sums over the days from `day` on."""
        ...

    def tests(self) -> int:
        """Runs submitted and not deleted, all users (a sum over a row a user)."""
        ...

    def clear(self) -> None: ...


class FileChunkStore(Protocol):
    """Nets' and books' bytes (storage/schema.py `file_chunks`)."""

    def put(self, kind: str, name: str, seq: int, data: bytes, sha256: str) -> None: ...
    def get(self, kind: str, name: str, seq: int) -> tuple[bytes, str] | None:
        """One chunk's bytes and their recorded SHA-256 (hex)."""
        ...

    def get_part(
        self, kind: str, name: str, seq: int, start: int, stop: int | None
    ) -> bytes | None:
        """Bytes [start, stop) of one chunk (to its end when stop is None),
        read without the rest of it where the database can; None when missing."""
        ...

    def count(self, kind: str, name: str) -> int: ...
    def delete(self, kind: str, name: str) -> int: ...


class PgnStore(Protocol):
    def put(self, run_id: str, task_id: int, pgn_zip: bytes, at: float) -> None:
        """Store (or replace: a worker may retry its upload) a task's gzip PGN."""
        ...

    def get(self, run_id: str, task_id: int) -> bytes | None: ...
    def list_for_run(self, run_id: str) -> list[PgnInfo]:
        """The run's stored PGNs by task_id, without their bytes."""
        ...

    def delete_for_run(self, run_id: str) -> int: ...
    def delete_uploaded_before(self, cutoff: float, limit: int) -> int:
        """Delete at most `limit` PGNs uploaded before `cutoff`, oldest first
        (through the uploaded_at index); returns how many."""
        ...


class NetStore(Protocol):
    def add(self, net: NetRecord) -> None:
        """Raises DuplicateKey("net", name) when a net of that name exists."""
        ...

    def get(self, name: str) -> NetRecord | None: ...
    def list(self, *, limit: int) -> list[NetRecord]:
        """Newest first."""
        ...

    def add_downloads(self, name: str, count: int) -> None:
        """Adds `count` to the net's downloads (none when no such net)."""
        ...

    def uploaded_by(self, username: str, since: float) -> UploadTally:
        """The nets `username` uploaded at or after `since` (by an index)."""
        ...

    def search(
        self, found: NetSearch, *, offset: int, limit: int
    ) -> tuple[Sequence[NetRecord], int]:
        """A page of the nets `found` selects, newest first, and how many it selects."""
        ...

    def mark_tested(self, name: str, test: Mapping[str, Any], *, master: bool) -> None:
        """`test` becomes the net's last test (and its first, if it had none);
        `master` marks it used by master (never unmarks). None when no such net."""
        ...


class BookStore(Protocol):
    def add(self, book: BookRecord) -> None:
        """Raises DuplicateKey("book", name) when a book of that name exists."""
        ...

    def get(self, name: str) -> BookRecord | None: ...
    def list(self) -> list[BookRecord]:
        """By name."""
        ...

    def uploaded_by(self, username: str, since: float) -> UploadTally:
        """The books `username` uploaded at or after `since`."""
        ...
