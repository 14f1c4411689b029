"""pgn retention: an index on when each PGN was uploaded

The retention job (ARBITER_PGN_RETENTION_DAYS, domain/files/pgns.py) deletes
the oldest PGNs first, a batch at a time; this index finds them without
scanning every PGN.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 07:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds an index (storage/migrate.py): code of 0014 runs on it unchanged.
EXPAND = True


def upgrade() -> None:
    op.create_index("ix_pgns_uploaded_at", "pgns", ["uploaded_at"])


def downgrade() -> None:
    op.drop_index("ix_pgns_uploaded_at", table_name="pgns")
