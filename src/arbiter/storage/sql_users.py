"""Users on SQL (SQLite and PostgreSQL alike, SQLAlchemy Core)."""

from typing import Any

from sqlalchemy import Connection, Row, case, delete, insert, select, update

from arbiter.storage.base import NewUser
from arbiter.storage.records import UserRecord
from arbiter.storage.schema import users
from arbiter.storage.sql_common import unique


def username_key(username: str) -> str:
    """The case-folded form that makes "Alice" and "alice" the same account name."""
    return username.casefold()


def _record(row: Row[Any]) -> UserRecord:
    return UserRecord(**row._mapping)


class SqlUserStore:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def add(self, user: NewUser) -> UserRecord:
        values = {
            "username": user.username,
            "username_key": username_key(user.username),
            "email": user.email,
            "password_hash": user.password_hash,
            "registration_time": user.registration_time,
            "pending": user.pending,
            "blocked": False,
            "is_approver": user.is_approver,
            "tests_repo": user.tests_repo,
            "machine_limit": 16,
            "credentials_version": 0,
        }
        with unique(self._connection, "username", user.username):
            row = self._connection.execute(insert(users).values(values).returning(*users.c)).one()
        return _record(row)

    def get(self, username: str) -> UserRecord | None:
        return self._one(users.c.username == username)

    def get_by_key(self, username: str) -> UserRecord | None:
        return self._one(users.c.username_key == username_key(username))

    def get_by_id(self, user_id: int) -> UserRecord | None:
        return self._one(users.c.id == user_id)

    def names_containing(self, text: str, limit: int) -> list[str]:
        key = username_key(text)
        starts = case((users.c.username_key.startswith(key, autoescape=True), 0), else_=1)
        query = (
            select(users.c.username)
            .where(users.c.username_key.contains(key, autoescape=True))
            .order_by(starts, users.c.username_key)
            .limit(limit)
        )
        return list(self._connection.execute(query).scalars())

    def pending_since_before(self, cutoff: float, limit: int) -> list[UserRecord]:
        query = (
            select(users)
            .where(users.c.pending.is_(True), users.c.registration_time < cutoff)
            .order_by(users.c.registration_time)
            .limit(limit)
        )
        return [_record(row) for row in self._connection.execute(query)]

    def list(self, *, pending: bool | None = None, blocked: bool | None = None) -> list[UserRecord]:
        query = select(users).order_by(users.c.username_key)
        if pending is not None:
            query = query.where(users.c.pending == pending)
        if blocked is not None:
            query = query.where(users.c.blocked == blocked)
        return [_record(row) for row in self._connection.execute(query)]

    def set_pending(self, user_id: int, pending: bool) -> None:
        self._update(user_id, pending=pending)

    def set_blocked(self, user_id: int, blocked: bool) -> None:
        self._update(user_id, blocked=blocked, credentials_version=users.c.credentials_version + 1)

    def set_password_hash(self, user_id: int, password_hash: str, *, new_secret: bool) -> None:
        if new_secret:
            self._update(
                user_id,
                password_hash=password_hash,
                credentials_version=users.c.credentials_version + 1,
            )
        else:
            self._update(user_id, password_hash=password_hash)

    def replace_password_hash(self, user_id: int, old_hash: str, new_hash: str) -> bool:
        result = self._connection.execute(
            update(users)
            .where(users.c.id == user_id, users.c.password_hash == old_hash)
            .values(password_hash=new_hash)
        )
        return result.rowcount == 1

    def set_worker_proof(self, user_id: int, proof: str) -> None:
        self._update(user_id, worker_proof=proof)

    def update_profile(
        self, user_id: int, *, email: str | None = None, tests_repo: str | None = None
    ) -> None:
        values = {"email": email, "tests_repo": tests_repo}
        changes = {name: value for name, value in values.items() if value is not None}
        if changes:
            self._update(user_id, **changes)

    def delete(self, user_id: int) -> bool:
        result = self._connection.execute(delete(users).where(users.c.id == user_id))
        return result.rowcount == 1

    def _one(self, condition: Any) -> UserRecord | None:
        row = self._connection.execute(select(users).where(condition)).one_or_none()
        return None if row is None else _record(row)

    def _update(self, user_id: int, **values: Any) -> None:
        self._connection.execute(update(users).where(users.c.id == user_id).values(**values))
