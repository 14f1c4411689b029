"""Helpers for the storage contract suite: users and sessions built in one line."""

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from arbiter.storage import Storage, durability
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


class HeldSyncs:
    """Stands in for `os.fdatasync` in storage/durability.py and holds every call
    until released: a write acknowledged while its sync is held was never synced.

    The real fdatasync still runs once released; `paths` names the files synced."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.paths: list[str] = []
        self._real = os.fdatasync
        self._lock = threading.Lock()

    def __call__(self, descriptor: int) -> None:
        with self._lock:
            self.paths.append(str(Path(f"/proc/self/fd/{descriptor}").readlink()))
        if not self.released.wait(60):
            raise AssertionError("a held fdatasync was never released")
        self._real(descriptor)

    def waiting(self) -> int:
        with self._lock:
            return len(self.paths)

    def wait_for_calls(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.waiting() < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.waiting()} fdatasync calls, expected {count}")
            time.sleep(0.005)


@contextmanager
def held_syncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldSyncs]:
    """fdatasync held for the block (released on the way out, whatever happened)."""
    held = HeldSyncs()
    monkeypatch.setattr(durability.os, "fdatasync", held)
    try:
        yield held
    finally:
        held.released.set()
