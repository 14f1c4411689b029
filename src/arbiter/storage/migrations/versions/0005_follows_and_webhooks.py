"""follows, the run events outbox, webhooks and their deliveries

Revision ID: 0005
Revises: 0003
Create Date: 2026-11-25 18:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds (storage/migrate.py): code of 0003 still works on this schema.
EXPAND = True


def upgrade() -> None:
    op.create_table(
        "follows",
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=24), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("username", "run_id", name=op.f("pk_follows")),
    )
    op.create_index(op.f("ix_follows_run_id"), "follows", ["run_id"])
    op.create_table(
        "run_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=24), nullable=False),
        sa.Column("action_id", sa.Integer(), nullable=False),
        sa.Column("dispatched", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_events")),
    )
    op.create_index(op.f("ix_run_events_dispatched_id"), "run_events", ["dispatched", "id"])
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=500), nullable=False),
        sa.Column("events", sa.String(length=64), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("secret", sa.String(length=64), nullable=False),
        sa.Column("all_runs", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_index(op.f("ix_webhooks_username"), "webhooks", ["username"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("hook_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=24), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=False),
        sa.Column("last_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("delivered_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["hook_id"],
            ["webhooks.id"],
            name=op.f("fk_webhook_deliveries_hook_id_webhooks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
    )
    op.create_index(
        op.f("ix_webhook_deliveries_status_next_attempt_at"),
        "webhook_deliveries",
        ["status", "next_attempt_at"],
    )
    op.create_index(
        op.f("ix_webhook_deliveries_hook_id_id"), "webhook_deliveries", ["hook_id", "id"]
    )


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
    op.drop_table("run_events")
    op.drop_table("follows")
