"""run χ²: a finished run's workers' χ² summary, kept

A run page scores its workers (χ² of homogeneity, a residual each); for a run
of thousands of machines that is tens of milliseconds of summing and scoring.
This table keeps each finished run's summary; a run without one gets it on its
first view (domain/runs/chi2_summaries.py).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 00:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds a table (storage/migrate.py): code of 0012 runs on it unchanged.
EXPAND = True


def upgrade() -> None:
    summary = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "run_chi2",
        sa.Column("run_id", sa.String(length=24), nullable=False),
        sa.Column("stamp", sa.String(length=200), nullable=False),
        sa.Column("summary", summary, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_chi2_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_chi2")),
    )


def downgrade() -> None:
    op.drop_table("run_chi2")
