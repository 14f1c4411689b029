"""contributor totals: per user all time, and per user and UTC day

The contributors page used to group every task of the history on each build
(minutes and gigabytes at Fishtest's 10 million tasks). These tables hold the
totals instead, kept as runs change (domain/runs/contribution_totals.py).
`arbiter db upgrade` fills them from the tasks once, after this revision.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds tables (storage/migrate.py): code of 0009 still works on this schema
# as a secondary; only a primary of this revision writes, and keeps them.
EXPAND = True


def _totals_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("games", sa.BigInteger(), nullable=False),
        sa.Column("cpu_seconds", sa.Float(), nullable=False),
        sa.Column("tests", sa.Integer(), nullable=False),
        sa.Column("last_active", sa.Float(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "contributor_totals",
        sa.Column("username", sa.String(length=64), nullable=False),
        *_totals_columns(),
        sa.PrimaryKeyConstraint("username", name=op.f("pk_contributor_totals")),
    )
    op.create_table(
        "contributor_days",
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("day", sa.Integer(), autoincrement=False, nullable=False),
        *_totals_columns(),
        sa.PrimaryKeyConstraint("username", "day", name=op.f("pk_contributor_days")),
    )
    op.create_index(op.f("ix_contributor_days_day"), "contributor_days", ["day"])


def downgrade() -> None:
    op.drop_index(op.f("ix_contributor_days_day"), table_name="contributor_days")
    op.drop_table("contributor_days")
    op.drop_table("contributor_totals")
