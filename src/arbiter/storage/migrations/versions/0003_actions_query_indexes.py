"""indexes for the audit log's MongoDB-style queries (/api/actions)

Fishtest clients ask for one user's actions of one kind, and for one worker's
(its failed and dead tasks): without these, such a query walks the time index
and tests every action until it has found enough, the whole log when the
user or worker is rare.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 16:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_actions_username_action_time"), ["username", "action", "time"]
        )
        batch_op.create_index(batch_op.f("ix_actions_worker_time"), ["worker", "time"])


def downgrade() -> None:
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_actions_worker_time"))
        batch_op.drop_index(batch_op.f("ix_actions_username_action_time"))
