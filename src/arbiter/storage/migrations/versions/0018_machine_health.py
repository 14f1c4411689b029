"""machine health: each machine's record as the health check last found it

One row a machine seen within the health check's window (domain/quarantine.py):
its counts over the window (runs, authors, tasks, games, crashes, time losses,
failed and silent tasks), its speeds and the evidence against it. The check
replaces the rows each time it runs; the worker page and the owner's profile
read them.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 18:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds a table (storage/migrate.py): code of 0017 runs on it unchanged.
EXPAND = True

DOCUMENT = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "machine_health",
        sa.Column("worker_name", sa.String(120), primary_key=True),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("checked_at", sa.Float, nullable=False),
        sa.Column("record", DOCUMENT, nullable=False),
    )
    op.create_index("ix_machine_health_username", "machine_health", ["username"])


def downgrade() -> None:
    op.drop_index("ix_machine_health_username", table_name="machine_health")
    op.drop_table("machine_health")
