"""The relational schema, shared by SQLite and PostgreSQL.

Times are Unix seconds as floats (the reference's `actions.time` convention):
one representation on both backends and on the wire, no timezone ambiguity.
Runs and tasks are rows, not one growing document: an update writes one task
row and the run's aggregate row in one transaction, and the run aggregates can
always be recomputed from the tasks.

Alembic migrations in `storage/migrations` create exactly this schema; a test
checks that the two agree.
"""

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from arbiter.storage.run_spec import RunSpec, spec_document, spec_of

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# JSON documents: JSONB on PostgreSQL, JSON text on SQLite.
Document = JSON().with_variant(JSONB(), "postgresql")


class RunSpecDocument(TypeDecorator[RunSpec]):
    """A run's `RunSpec` stored as the reference's `args` object (a Document):
    rows read and write specs, SQL reads the object's keys as before."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())

    def process_bind_param(self, value: RunSpec | None, dialect: Dialect) -> Any:
        return None if value is None else spec_document(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> RunSpec | None:
        return None if value is None else spec_of(value)


users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("username", String(64), nullable=False, unique=True),
    # Case-folded copy: "Alice" and "alice" may not both register.
    Column("username_key", String(64), nullable=False, unique=True),
    Column("email", String(254), nullable=False, default=""),
    Column("password_hash", String(255), nullable=False),
    Column("registration_time", Float, nullable=False),
    Column("pending", Boolean, nullable=False, default=True),
    Column("blocked", Boolean, nullable=False, default=False),
    Column("is_approver", Boolean, nullable=False, default=False),
    Column("tests_repo", String(500), nullable=False, default=""),
    Column("machine_limit", Integer, nullable=False, default=16),
    # Bumped on password change and blocking: lets caches of verified
    # credentials notice that they are stale.
    Column("credentials_version", Integer, nullable=False, default=0),
    # HMAC of the password argon2 last verified for a worker, under a key kept
    # outside the database (domain/credentials.py: WorkerProofs).
    Column("worker_proof", String(64), nullable=True),
)

sessions = Table(
    "sessions",
    metadata,
    # SHA-256 of the random session id; the cookie carries the id itself, so
    # a copy of the database cannot be replayed as a login.
    Column("id_hash", String(64), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("remember", Boolean, nullable=False, default=False),
    Column("csrf_token", String(64), nullable=False),
    Index(None, "user_id"),
    Index(None, "expires_at"),
)

worker_tokens = Table(
    "worker_tokens",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("label", String(100), nullable=False, default=""),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    Column("last_used", Float, nullable=True),
    Column("revoked_at", Float, nullable=True),
    Index(None, "user_id"),
)

runs = Table(
    "runs",
    metadata,
    # 24 hex digits, like the reference's ObjectId: workers send it back as run_id.
    Column("id", String(24), primary_key=True),
    Column("version", Integer, nullable=False, default=1),
    Column("username", String(64), nullable=False),
    Column("start_time", Float, nullable=False),
    Column("last_updated", Float, nullable=False),
    Column("tc_base", Float, nullable=False, default=0.0),
    Column("rescheduled_from", String(24), nullable=True),
    Column("approved", Boolean, nullable=False, default=False),
    Column("approver", String(64), nullable=False, default=""),
    Column("finished", Boolean, nullable=False, default=False),
    Column("deleted", Boolean, nullable=False, default=False),
    Column("failed", Boolean, nullable=False, default=False),
    Column("failures", Integer, nullable=False, default=0),
    Column("is_green", Boolean, nullable=False, default=False),
    Column("is_yellow", Boolean, nullable=False, default=False),
    # Aggregates, derivable from the tasks (recomputed and checked at start-up).
    Column("workers", Integer, nullable=False, default=0),
    Column("cores", Integer, nullable=False, default=0),
    Column("committed_games", BigInteger, nullable=False, default=0),
    Column("total_games", BigInteger, nullable=False, default=0),
    Column("wins", BigInteger, nullable=False, default=0),
    Column("losses", BigInteger, nullable=False, default=0),
    Column("draws", BigInteger, nullable=False, default=0),
    Column("crashes", BigInteger, nullable=False, default=0),
    Column("time_losses", BigInteger, nullable=False, default=0),
    Column("pentanomial", Document, nullable=False),
    Column("nps", Float, nullable=False, default=0.0),
    Column("games_per_minute", Float, nullable=False, default=0.0),
    # args as in the reference (base_tag, new_tag, tc, ..., sprt or spsa state).
    Column("args", RunSpecDocument(), nullable=False),
    # Fixed points of the results over time (domain/runs/history.py), apart from
    # the args so that a result update need not re-encode them.
    Column("results_history", Document, nullable=True),
    Index(None, "finished", "last_updated"),
    Index(None, "username", "start_time"),
    # The finished lists' tabs and a user's tests, newest update first (keyset
    # pages), each counted from its index alone (storage/sql_finished.py).
    Index(None, "is_green", "finished", "deleted", "last_updated"),
    Index(None, "is_yellow", "finished", "deleted", "last_updated"),
    Index(None, "username", "finished", "deleted", "last_updated"),
    Index(None, "finished", "deleted", "last_updated", "tc_base"),
)

# The words each run is found by, for the text search (storage/run_search.py,
# which also holds each backend's text index over `words`: not declared here).
# `seq` orders runs by submission: search results come newest first by it.
run_words = Table(
    "run_words",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(24), nullable=False, unique=True),
    Column("words", Text, nullable=False),
)

# Terms compare by code point on both backends, so a prefix is a key range.
TERM_TEXT = Text().with_variant(Text(collation="C"), "postgresql")
# Every token ever indexed in run_words, so that a search expands a prefix into
# the few whole terms it stands for (storage/run_search.py). A term whose runs
# are gone stays: it then matches nothing.
run_terms = Table(
    "run_terms",
    metadata,
    Column("term", TERM_TEXT, primary_key=True),
)

tasks = Table(
    "tasks",
    metadata,
    Column("run_id", String(24), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", Integer, primary_key=True, autoincrement=False),
    Column("num_games", Integer, nullable=False),
    Column("start", BigInteger, nullable=False),
    Column("active", Boolean, nullable=False),
    Column("bad", Boolean, nullable=False, default=False),
    Column("last_updated", Float, nullable=False),
    Column("username", String(64), nullable=False),
    Column("worker_name", String(120), nullable=False),  # short name: identity of a machine
    Column("unique_key", String(64), nullable=False),
    Column("remote_addr", String(64), nullable=False, default=""),
    Column("worker_info", Document, nullable=False),
    Column("wins", Integer, nullable=False, default=0),
    Column("losses", Integer, nullable=False, default=0),
    Column("draws", Integer, nullable=False, default=0),
    Column("crashes", Integer, nullable=False, default=0),
    Column("time_losses", Integer, nullable=False, default=0),
    Column("pentanomial", Document, nullable=False),
    Column("residual", Float, nullable=True),
    Column("spsa_params", Document, nullable=True),
    Index(None, "active", "run_id"),
    Index(None, "worker_name", "active"),
)

# A finished run's χ² of its workers (domain/runs/chi2_summaries.py), kept so
# the first view of a run of thousands of machines reads it instead of summing
# every task; `stamp` names the results it was computed from.
run_chi2 = Table(
    "run_chi2",
    metadata,
    Column("run_id", String(24), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("stamp", String(200), nullable=False),
    Column("summary", Document, nullable=False),
)

# Who gave the fleet its games (the contributors page, a worker's right to stop
# a run), kept as runs change (domain/runs/contribution_totals.py): per user,
# the games and CPU time of their workers in finished runs and the runs they
# submitted; all time, and per UTC day for the last 30 days' table.
contributor_totals = Table(
    "contributor_totals",
    metadata,
    Column("username", String(64), primary_key=True),
    Column("games", BigInteger, nullable=False, default=0),
    Column("cpu_seconds", Float, nullable=False, default=0.0),
    Column("tests", Integer, nullable=False, default=0),
    Column("last_active", Float, nullable=False, default=0.0),
)

contributor_days = Table(
    "contributor_days",
    metadata,
    Column("username", String(64), primary_key=True),
    Column("day", Integer, primary_key=True, autoincrement=False),  # days since 1970-01-01 UTC
    Column("games", BigInteger, nullable=False, default=0),
    Column("cpu_seconds", Float, nullable=False, default=0.0),
    Column("tests", Integer, nullable=False, default=0),
    Column("last_active", Float, nullable=False, default=0.0),
    Index(None, "day"),
)

actions = Table(
    "actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", Float, nullable=False),
    Column("action", String(32), nullable=False),
    Column("username", String(64), nullable=False),
    Column("run_id", String(24), nullable=True),
    Column("run", String(64), nullable=True),
    Column("task_id", Integer, nullable=True),
    Column("worker", String(160), nullable=True),
    Column("user", String(64), nullable=True),  # the account acted upon (accept/block)
    Column("message", Text, nullable=False, default=""),
    Column("data", Document, nullable=True),
    # The action's ObjectId in a Fishtest database it was imported from
    # (`arbiter import fishtest`): shown as its `_id`, so old links keep working.
    Column("fishtest_id", String(24), nullable=True, unique=True),
    Index(None, "time"),
    Index(None, "action", "time"),
    Index(None, "username", "time"),
    Index(None, "run_id", "time"),
    Index(None, "username", "action", "time"),
    Index(None, "worker", "time"),
)

# Each machine's health over the window, as the health check last found it
# (domain/quarantine.py); its worker page and its owner's profile show it.
machine_health = Table(
    "machine_health",
    metadata,
    Column("worker_name", String(120), primary_key=True),
    Column("username", String(64), nullable=False),  # its owner's username_key
    Column("checked_at", Float, nullable=False),
    Column("record", Document, nullable=False),  # MachineHealthRecord.record
    Index(None, "username"),
)

# Machines the health rule quarantined (domain/quarantine.py): while `active`,
# the scheduler refuses them; `evidence` is the findings that convicted them,
# `dismissed` the runs whose findings an approver set aside by releasing it.
machine_quarantine = Table(
    "machine_quarantine",
    metadata,
    Column("worker_name", String(120), primary_key=True),
    Column("active", Boolean, nullable=False),
    Column("since", Float, nullable=False),
    Column("evidence", Document, nullable=False),
    Column("dismissed", Document, nullable=False),
    Column("released_by", String(64), nullable=False, default=""),
    Column("released_at", Float, nullable=True),
    Index(None, "active"),
)

workers = Table(
    "workers",
    metadata,
    Column("worker_name", String(120), primary_key=True),
    Column("blocked", Boolean, nullable=False, default=False),
    Column("message", String(500), nullable=False, default=""),
    Column("last_updated", Float, nullable=False),
)

nets = Table(
    "nets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("username", String(64), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("uploaded_at", Float, nullable=False),
    Column("downloads", Integer, nullable=False, default=0),
    Column("is_master", Boolean, nullable=False, default=False),
    Column("first_test", Document, nullable=True),
    Column("last_test", Document, nullable=True),
    Index(None, "username", "uploaded_at"),
)

books = Table(
    "books",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("username", String(64), nullable=False),
    Column("sri", String(128), nullable=False),  # book_sri: base64 of SHA-384 (protocol.books)
    Column("size", BigInteger, nullable=False),
    Column("total", Integer, nullable=False),  # positions (EPD lines or PGN games)
    Column("uploaded_at", Float, nullable=False),
)

pgns = Table(
    "pgns",
    metadata,
    Column("run_id", String(24), primary_key=True),
    Column("task_id", Integer, primary_key=True, autoincrement=False),
    Column("size", Integer, nullable=False),
    Column("pgn_zip", LargeBinary, nullable=False),  # gzip member, served as-is
    Column("uploaded_at", Float, nullable=False),
    Index(None, "uploaded_at"),  # the retention job deletes the oldest first
)

# Nets and hosted books, in chunks, so every process serves them from the
# database alone (no shared filesystem). `kind` is "net" or "book"; chunks are
# numbered from 0, each CHUNK_BYTES long but the last, with its own SHA-256.
file_chunks = Table(
    "file_chunks",
    metadata,
    Column("kind", String(8), primary_key=True),
    Column("name", String(255), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("sha256", String(64), nullable=False),
    Column("data", LargeBinary, nullable=False),
)

kv = Table(
    "kv",
    metadata,
    Column("key", String(128), primary_key=True),
    Column("value", Document, nullable=False),
)

# ---- Follow, notify, webhooks (domain/follows.py, domain/webhooks.py) ----

follows = Table(
    "follows",
    metadata,
    Column("username", String(64), primary_key=True),
    Column("run_id", String(24), primary_key=True),
    Column("created_at", Float, nullable=False),
    Index(None, "run_id"),
)

# An outbox: approve, finish and stop of a run, written in the transaction that
# records the action, and turned into webhook deliveries by the jobs executor.
run_events = Table(
    "run_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", Float, nullable=False),
    Column("event", String(16), nullable=False),  # approved, finished, stopped, quarantined
    Column("run_id", String(24), nullable=False),  # "" for a machine's event
    Column("worker", String(120), nullable=False, server_default=""),  # a machine's event
    Column("action_id", Integer, nullable=False),
    Column("dispatched", Boolean, nullable=False, default=False),
    Index(None, "dispatched", "id"),
)

webhooks = Table(
    "webhooks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("username", String(64), nullable=False),
    Column("url", String(500), nullable=False),
    Column("events", String(64), nullable=False),  # comma-separated event names
    Column("format", String(16), nullable=False),  # json, discord, slack
    Column("secret", String(64), nullable=False),  # HMAC-SHA256 key of the signature header
    Column("all_runs", Boolean, nullable=False, default=False),  # an approver's: every run
    Column("created_at", Float, nullable=False),
    Index(None, "username"),
)

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("hook_id", Integer, ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False),
    Column("event", String(16), nullable=False),
    Column("run_id", String(24), nullable=False),
    Column("worker", String(120), nullable=False, server_default=""),
    Column("body", Text, nullable=False),  # the exact bytes signed and sent (UTF-8 JSON)
    Column("status", String(16), nullable=False),  # pending, delivered, failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", Float, nullable=False),
    Column("last_code", Integer, nullable=True),
    Column("last_error", String(300), nullable=False, default=""),
    Column("created_at", Float, nullable=False),
    Column("delivered_at", Float, nullable=True),
    Index(None, "status", "next_attempt_at"),
    Index(None, "hook_id", "id"),
)
