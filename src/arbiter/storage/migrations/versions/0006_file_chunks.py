"""nets and hosted books stored in the database, in chunks

Every process then serves them from the database alone: a secondary on
another machine needs no shared filesystem. `arbiter db upgrade` copies the
files already in the data dir (domain/files/data_dir_import.py). An expand: old code
never reads this table, so old secondaries keep serving while the primary
moves first.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 18:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EXPAND = True  # storage/migrate.py: code of 0005 still works on this schema


def upgrade() -> None:
    op.create_table(
        "file_chunks",
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "name", "seq", name=op.f("pk_file_chunks")),
    )


def downgrade() -> None:
    op.drop_table("file_chunks")
