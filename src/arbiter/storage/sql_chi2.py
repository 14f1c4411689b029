"""Finished runs' χ² summaries on SQL: one row a run, replaced whole."""

from sqlalchemy import Connection, delete, insert, select

from arbiter.storage.base import StoredChi2
from arbiter.storage.schema import run_chi2


class SqlChi2SummaryStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, run_id: str) -> StoredChi2 | None:
        query = select(run_chi2.c.stamp, run_chi2.c.summary).where(run_chi2.c.run_id == run_id)
        row = self._connection.execute(query).first()
        return None if row is None else StoredChi2(row.stamp, row.summary)

    def put(self, run_id: str, stored: StoredChi2) -> None:
        # Delete then insert: one statement on either backend, and two views
        # storing the same run's summary at once end with one row (the
        # primary key serialises them).
        self._connection.execute(delete(run_chi2).where(run_chi2.c.run_id == run_id))
        self._connection.execute(
            insert(run_chi2).values(run_id=run_id, stamp=stored.stamp, summary=stored.summary)
        )
