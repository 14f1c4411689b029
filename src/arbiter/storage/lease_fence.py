"""Fencing: a primary that was frozen (SIGSTOP, a paused VM) and wakes after a
standby took the database over must write nothing.

Each primary writes a token of its own under MARKER_KEY in the kv table when
it takes the lease (web/lease.py), before it loads the live runs. On
PostgreSQL, where a standby can take over, every write transaction of the
primary first reads that marker with a share lock held to its commit
(`LeaseFence`): a marker that names another primary aborts the transaction
(LeaseLost) before anything is written. A standby's claim (an UPDATE of the
marker) waits for the writes that hold the share lock, and it loads the runs
only after its claim, so a write either lands before the claim and is
loaded, or is refused.
"""

from typing import Any

from sqlalchemy import Connection

from arbiter.storage.errors import LeaseLost
from arbiter.storage.prepared import fetch_row

MARKER_KEY = "primary_lease"
MARK_HOLDER_QUERY = "SELECT value ->> 'token' FROM kv WHERE key = %s FOR SHARE"


def marker_token(value: Any) -> str | None:
    """The primary's token in the marker's stored value."""
    token = value.get("token") if isinstance(value, dict) else None
    return None if token is None else str(token)


class LeaseFence:
    """The check of every write transaction of the primary holding `token`."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, connection: Connection) -> None:
        # One plain statement, the token taken out by PostgreSQL, sent on the
        # driver's cursor as the hot writes are (no execution context): it runs
        # before every write of the primary, the results thread's among them.
        row = fetch_row(connection, MARK_HOLDER_QUERY, (MARKER_KEY,))
        if row is None or row[0] != self.token:
            raise LeaseLost(
                "another primary has taken this database over: this process's state is "
                "stale and it writes nothing more; restart it"
            )
