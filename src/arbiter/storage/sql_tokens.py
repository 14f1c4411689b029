"""Worker tokens on SQL. Only the SHA-256 of a token is ever stored."""

from sqlalchemy import Connection, insert, select, update

from arbiter.storage.records import TokenRecord
from arbiter.storage.schema import worker_tokens
from arbiter.storage.sql_common import unique


class SqlTokenStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, *, user_id: int, label: str, token_hash: str, created_at: float) -> TokenRecord:
        statement = (
            insert(worker_tokens)
            .values(user_id=user_id, label=label, token_hash=token_hash, created_at=created_at)
            .returning(*worker_tokens.c)
        )
        # Credentials material never goes into an error message, not even a hash.
        with unique(self._connection, "token", None):
            row = self._connection.execute(statement).one()
        return TokenRecord(**row._mapping)

    def get_by_hash(self, token_hash: str) -> TokenRecord | None:
        query = select(worker_tokens).where(worker_tokens.c.token_hash == token_hash)
        row = self._connection.execute(query).one_or_none()
        return None if row is None else TokenRecord(**row._mapping)

    def list_for_user(self, user_id: int) -> list[TokenRecord]:
        query = (
            select(worker_tokens)
            .where(worker_tokens.c.user_id == user_id)
            .order_by(worker_tokens.c.id)
        )
        return [TokenRecord(**row._mapping) for row in self._connection.execute(query)]

    def touch(self, token_id: int, last_used: float) -> None:
        self._connection.execute(
            update(worker_tokens).where(worker_tokens.c.id == token_id).values(last_used=last_used)
        )

    def revoke(self, *, user_id: int, token_id: int, at: float) -> bool:
        mine = (worker_tokens.c.id == token_id) & (worker_tokens.c.user_id == user_id)
        exists = self._connection.execute(select(worker_tokens.c.id).where(mine)).first()
        if exists is None:
            return False
        # Keep the first revocation time: revoking twice is not a new event.
        self._connection.execute(
            update(worker_tokens)
            .where(mine, worker_tokens.c.revoked_at.is_(None))
            .values(revoked_at=at)
        )
        return True

    def revoke_all(self, *, user_id: int, at: float) -> int:
        live = (worker_tokens.c.user_id == user_id) & worker_tokens.c.revoked_at.is_(None)
        result = self._connection.execute(update(worker_tokens).where(live).values(revoked_at=at))
        return result.rowcount
