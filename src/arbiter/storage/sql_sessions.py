"""Login sessions on SQL. Rows are keyed by the SHA-256 of the session id."""

from dataclasses import asdict

from sqlalchemy import Connection, delete, insert, select, update

from arbiter.storage.records import SessionRecord
from arbiter.storage.schema import sessions


class SqlSessionStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, session: SessionRecord) -> None:
        self._connection.execute(insert(sessions).values(asdict(session)))

    def get(self, id_hash: str) -> SessionRecord | None:
        query = select(sessions).where(sessions.c.id_hash == id_hash)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else SessionRecord(**row._mapping)

    def touch(self, id_hash: str, last_seen: float) -> None:
        self._connection.execute(
            update(sessions).where(sessions.c.id_hash == id_hash).values(last_seen=last_seen)
        )

    def delete(self, id_hash: str) -> bool:
        result = self._connection.execute(delete(sessions).where(sessions.c.id_hash == id_hash))
        return result.rowcount == 1

    def delete_for_user(self, user_id: int, *, keep_id_hash: str | None = None) -> int:
        statement = delete(sessions).where(sessions.c.user_id == user_id)
        if keep_id_hash is not None:
            statement = statement.where(sessions.c.id_hash != keep_id_hash)
        return self._connection.execute(statement).rowcount

    def delete_expired(self, now: float) -> int:
        statement = delete(sessions).where(sessions.c.expires_at <= now)
        return self._connection.execute(statement).rowcount
