"""Helpers for the storage contract suite: users and sessions built in one line."""

import hashlib
from typing import Any

from arbiter.storage import Storage
from arbiter.storage.base import NewUser
from arbiter.storage.records import SessionRecord, UserRecord

T0 = 1_800_000_000.0


def new_user(username: str, **overrides: Any) -> NewUser:
    values: dict[str, Any] = {
        "username": username,
        "email": f"{username.lower()}@example.org",
        "password_hash": f"hash-of-{username}",
        "registration_time": T0,
        "pending": False,
        **overrides,
    }
    return NewUser(**values)


def add_user(storage: Storage, username: str, **overrides: Any) -> UserRecord:
    with storage.write() as tx:
        return tx.users.add(new_user(username, **overrides))


def session_record(
    id_hash: str, user_id: int, *, expires_at: float = T0 + 3600, remember: bool = False
) -> SessionRecord:
    return SessionRecord(
        id_hash=id_hash,
        user_id=user_id,
        created_at=T0,
        last_seen=T0,
        expires_at=expires_at,
        remember=remember,
        csrf_token=hashlib.sha256(id_hash.encode()).hexdigest(),  # 64 characters, as the column
    )


def add_token(storage: Storage, user_id: int, token_hash: str, *, label: str = "") -> int:
    with storage.write() as tx:
        return tx.tokens.add(user_id=user_id, label=label, token_hash=token_hash, created_at=T0).id
