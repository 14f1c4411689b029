"""the finished lists at Fishtest's size: indexes for keyset pages, and text search

Adds `run_words` (each run's owner, branches and description, cut into tokens)
with the backend's own text index over it (storage/run_search.py: FTS5 on
SQLite, GIN on PostgreSQL), filled from the stored runs, oldest submission
first; and indexes on runs for the green and yellow tabs and a user's tests,
newest update first (the whole list and the LTC tab without reading a row).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from arbiter.storage import run_search
from arbiter.storage.run_spec import RunSpec, spec_of

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds (storage/migrate.py): code of 0010 still works on this schema as a
# secondary; only a primary of this revision writes runs, and keeps run_words.
EXPAND = True
FILL_BATCH = 5_000

_RUN_INDEXES = (
    (
        "ix_runs_is_green_finished_deleted_last_updated",
        ["is_green", "finished", "deleted", "last_updated"],
    ),
    (
        "ix_runs_is_yellow_finished_deleted_last_updated",
        ["is_yellow", "finished", "deleted", "last_updated"],
    ),
    (
        "ix_runs_username_finished_deleted_last_updated",
        ["username", "finished", "deleted", "last_updated"],
    ),
    (
        "ix_runs_finished_deleted_last_updated_tc_base",
        ["finished", "deleted", "last_updated", "tc_base"],
    ),
)


def upgrade() -> None:
    op.create_table(
        "run_words",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=24), nullable=False),
        sa.Column("words", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_run_words")),
        sa.UniqueConstraint("run_id", name=op.f("uq_run_words_run_id")),
    )
    connection = op.get_bind()
    postgresql = connection.dialect.name == "postgresql"
    for statement in run_search.POSTGRESQL_DDL if postgresql else run_search.SQLITE_DDL:
        op.execute(statement)
    for name, columns in _RUN_INDEXES:
        op.create_index(name, "runs", columns)
    _fill(connection)


def _fill(connection: sa.Connection) -> None:
    runs = sa.table(
        "runs",
        sa.column("id"),
        sa.column("username"),
        sa.column("start_time"),
        sa.column("args", sa.JSON()),
    )
    fields = ("new_tag", "base_tag", "info")
    query = (
        sa.select(runs.c.id, runs.c.username, *(runs.c.args[f].as_string() for f in fields))
        .order_by(runs.c.start_time, runs.c.id)
        .execution_options(yield_per=FILL_BATCH)
    )
    batch: list[tuple[str, str, RunSpec]] = []
    for run_id, username, *texts in connection.execute(query):
        words = dict(zip(fields, (text or "" for text in texts), strict=True))
        batch.append((run_id, username, spec_of(words)))
        if len(batch) >= FILL_BATCH:
            run_search.add_words(connection, batch)
            batch = []
    run_search.add_words(connection, batch)


def downgrade() -> None:
    for name, _ in reversed(_RUN_INDEXES):
        op.drop_index(name, table_name="runs")
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in run_search.POSTGRESQL_DROP if postgresql else run_search.SQLITE_DROP:
        op.execute(statement)
    op.drop_table("run_words")
