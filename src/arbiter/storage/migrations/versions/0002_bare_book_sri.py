"""book sri in the wire form: bare base64, no "sha384-" prefix

The official Fishtest worker compares `book_sri` with the bare base64 of the
SHA-384 of the book's text, the form official-stockfish/books stores; Arbiter
stored the Subresource Integrity form ("sha384-<base64>"). Books hold text
with LF line endings in practice, so the digest itself is unchanged.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25 16:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PREFIX = "sha384-"


def upgrade() -> None:
    books = sa.table("books", sa.column("sri", sa.String))
    op.execute(
        books.update()
        .where(books.c.sri.like(f"{_PREFIX}%"))
        .values(sri=sa.func.substr(books.c.sri, len(_PREFIX) + 1))
    )


def downgrade() -> None:
    books = sa.table("books", sa.column("sri", sa.String))
    op.execute(books.update().values(sri=sa.literal(_PREFIX) + books.c.sri))
