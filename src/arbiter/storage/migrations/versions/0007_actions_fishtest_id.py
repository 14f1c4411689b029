"""the Fishtest ObjectId of an imported action

`arbiter import fishtest` keeps each action's id: the API shows it as the
action's `_id`, and its unique index lets a resumed import skip what it
already wrote.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 18:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds (storage/migrate.py): code of 0006 still works on this schema.
EXPAND = True


def upgrade() -> None:
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fishtest_id", sa.String(length=24), nullable=True))
        batch_op.create_unique_constraint(batch_op.f("uq_actions_fishtest_id"), ["fishtest_id"])


def downgrade() -> None:
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_actions_fishtest_id"), type_="unique")
        batch_op.drop_column("fishtest_id")
