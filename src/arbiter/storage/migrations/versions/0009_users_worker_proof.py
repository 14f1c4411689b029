"""a user's worker proof: a keyed MAC of the password last verified by argon2

A worker sends its account password on every call. Once argon2 has verified
it, the server stores HMAC-SHA256 of it under a key kept outside the database
(domain/credentials.py, `WorkerProofs`), so a restarted server checks each
returning worker with one MAC instead of one argon2 verification: a fleet that
reconnects together is served at once. Without the key the column tells an
attacker nothing, and no guess can be tested against it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Adds a nullable column (storage/migrate.py): every query of 0008 stays valid
# on this schema; code of 0008 verifies every password with argon2, as before.
EXPAND = True


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("worker_proof", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("worker_proof")
