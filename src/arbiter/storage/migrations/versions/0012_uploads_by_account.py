"""uploads by account: an index for the daily upload quota

The quota (domain/files/upload_quota.py) counts an account's nets of the last
24 hours before each upload; this index reads them without scanning the nets.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 16:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds an index (storage/migrate.py): code of 0011 runs on it unchanged.
EXPAND = True


def upgrade() -> None:
    op.create_index("ix_nets_username_uploaded_at", "nets", ["username", "uploaded_at"])


def downgrade() -> None:
    op.drop_index("ix_nets_username_uploaded_at", table_name="nets")
