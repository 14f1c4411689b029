"""run terms: every token of the text search, so a prefix expands to whole terms

A search for a prefix makes either backend's text index gather and merge the
lists of every term it starts before the first row; the same search over the
few whole terms it stands for reads their lists lazily, in order
(storage/run_search.py). This table holds every token in run_words, filled
here from the stored words.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from arbiter.storage import run_search

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Only adds a table (storage/migrate.py): code of 0013 still serves on it as a
# secondary; only a primary of this revision writes runs, and keeps run_terms.
EXPAND = True
FILL_BATCH = 20_000


def upgrade() -> None:
    op.create_table(
        "run_terms",
        sa.Column("term", sa.Text().with_variant(sa.Text(collation="C"), "postgresql")),
        sa.PrimaryKeyConstraint("term", name=op.f("pk_run_terms")),
    )
    run_words = sa.table("run_words", sa.column("words"))
    query = sa.select(run_words.c.words).execution_options(yield_per=FILL_BATCH)
    connection = op.get_bind()
    for batch in connection.execute(query).scalars().partitions():
        run_search.add_terms(connection, batch)


def downgrade() -> None:
    op.drop_table("run_terms")
