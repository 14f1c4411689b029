"""machine quarantine: machines the health rule took out of the fleet

One row a machine the rule ever quarantined (domain/quarantine.py): whether
the quarantine holds, since when, the evidence, and the runs whose evidence
an approver dismissed by releasing it.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds a table (storage/migrate.py): code of 0015 runs on it unchanged.
EXPAND = True

DOCUMENT = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "machine_quarantine",
        sa.Column("worker_name", sa.String(120), primary_key=True),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("since", sa.Float, nullable=False),
        sa.Column("evidence", DOCUMENT, nullable=False),
        sa.Column("dismissed", DOCUMENT, nullable=False),
        sa.Column("released_by", sa.String(64), nullable=False),
        sa.Column("released_at", sa.Float, nullable=True),
    )
    op.create_index("ix_machine_quarantine_active", "machine_quarantine", ["active"])


def downgrade() -> None:
    op.drop_index("ix_machine_quarantine_active", table_name="machine_quarantine")
    op.drop_table("machine_quarantine")
