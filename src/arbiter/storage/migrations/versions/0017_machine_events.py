"""machine events: webhook events about a machine, not a run

The webhooks' outbox and deliveries carried run events only. A quarantine
(domain/quarantine.py) is an event about a machine: its name goes in the new
`worker` column, and `run_id` is empty.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds columns with a default (storage/migrate.py): code of 0016 runs on it unchanged.
EXPAND = True

TABLES = ("run_events", "webhook_deliveries")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("worker", sa.String(120), nullable=False, server_default=""))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:  # SQLite drops a column by copying the table
            batch.drop_column("worker")
