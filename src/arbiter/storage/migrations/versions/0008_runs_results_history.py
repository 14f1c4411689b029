"""a run's results history in its own column, out of its args

The charts' points (domain/runs/history.py) lived in `args["results_history"]`,
so every result update of an SPRT run re-encoded them with the SPRT state it
changes (measured on the fleet). They move to `runs.results_history`, which a result update
writes only when it fixes a point; the latest point is derived from the run.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 07:00:00
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Adds a nullable column (storage/migrate.py): every query of 0007 stays valid
# on this schema. Code of 0007 draws no charts from the moved points until it
# is upgraded too; nothing else of it reads them.
EXPAND = True

_KEY = "results_history"
_DOCUMENT = sa.JSON().with_variant(JSONB(), "postgresql")
_runs = sa.table(
    "runs",
    sa.column("id", sa.String),
    sa.column("args", _DOCUMENT),
    sa.column(_KEY, _DOCUMENT),
)


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column(_KEY, _DOCUMENT, nullable=True))
    connection = op.get_bind()
    # Only runs made by Arbiter have the key (a Fishtest import has none): the
    # text test keeps the other runs' args, most of an imported database, unread.
    mentioned = sa.cast(_runs.c.args, sa.Text).like(f'%"{_KEY}"%')
    query = sa.select(_runs.c.id, _runs.c.args).where(mentioned)
    for run_id, args in connection.execute(query).all():
        if isinstance(args, dict) and _KEY in args:
            history = args.pop(_KEY)
            _set(connection, run_id, args=args, results_history=_fixed(history))


def downgrade() -> None:
    connection = op.get_bind()
    query = sa.select(_runs.c.id, _runs.c.args, _runs.c[_KEY]).where(_runs.c[_KEY].is_not(None))
    for run_id, args, history in connection.execute(query).all():
        if history is not None:
            _set(connection, run_id, args={**args, _KEY: history})
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column(_KEY)


def _fixed(history: Any) -> dict[str, Any] | None:
    """The stored points with the last dropped: it followed the results until it
    was fixed, and the run's totals now stand for it whether it was or not."""
    if not isinstance(history, dict) or not history.get("points"):
        return None
    return {"step": history["step"], "points": history["points"][:-1]}


def _set(connection: sa.Connection, run_id: str, **values: Any) -> None:
    connection.execute(_runs.update().where(_runs.c.id == run_id).values(**values))
