"""The session store: rows keyed by the digest of the session id."""

from dataclasses import replace

import pytest

from arbiter.storage import Storage
from arbiter.storage.records import SessionRecord
from tests.storage.support import T0, add_user, session_record


@pytest.fixture
def user_id(storage: Storage) -> int:
    return add_user(storage, "alice").id


def test_add_then_get_round_trips_the_record(storage: Storage, user_id: int) -> None:
    record = session_record("a" * 64, user_id, remember=True)
    with storage.write() as tx:
        tx.sessions.add(record)
    with storage.read() as tx:
        assert tx.sessions.get("a" * 64) == record


def test_get_unknown_session_is_none(storage: Storage) -> None:
    with storage.read() as tx:
        assert tx.sessions.get("f" * 64) is None


def test_touch_updates_last_seen_only(storage: Storage, user_id: int) -> None:
    record = session_record("a" * 64, user_id)
    with storage.write() as tx:
        tx.sessions.add(record)
        tx.sessions.touch("a" * 64, T0 + 60)
    with storage.read() as tx:
        assert tx.sessions.get("a" * 64) == replace(record, last_seen=T0 + 60)


def test_delete_reports_whether_a_session_went(storage: Storage, user_id: int) -> None:
    with storage.write() as tx:
        tx.sessions.add(session_record("a" * 64, user_id))
        assert tx.sessions.delete("a" * 64)
        assert not tx.sessions.delete("a" * 64)
        assert tx.sessions.get("a" * 64) is None


def _add_all(storage: Storage, *records: SessionRecord) -> None:
    with storage.write() as tx:
        for record in records:
            tx.sessions.add(record)


def _present(storage: Storage, *id_hashes: str) -> list[str]:
    with storage.read() as tx:
        return [h for h in id_hashes if tx.sessions.get(h) is not None]


def test_delete_for_user_removes_all_of_that_users_sessions(storage: Storage, user_id: int) -> None:
    bob = add_user(storage, "bob").id
    a1, a2, b1 = "a1".ljust(64, "0"), "a2".ljust(64, "0"), "b1".ljust(64, "0")
    _add_all(
        storage,
        session_record(a1, user_id),
        session_record(a2, user_id),
        session_record(b1, bob),
    )
    with storage.write() as tx:
        assert tx.sessions.delete_for_user(user_id) == 2
    assert _present(storage, a1, a2, b1) == [b1]


def test_delete_for_user_can_keep_one_session(storage: Storage, user_id: int) -> None:
    a1, a2, a3 = "a1".ljust(64, "0"), "a2".ljust(64, "0"), "a3".ljust(64, "0")
    _add_all(
        storage,
        session_record(a1, user_id),
        session_record(a2, user_id),
        session_record(a3, user_id),
    )
    with storage.write() as tx:
        assert tx.sessions.delete_for_user(user_id, keep_id_hash=a2) == 2
    assert _present(storage, a1, a2, a3) == [a2]


def test_delete_for_user_without_sessions_is_zero(storage: Storage, user_id: int) -> None:
    with storage.write() as tx:
        assert tx.sessions.delete_for_user(user_id) == 0


def test_delete_expired_removes_sessions_expired_at_or_before_now(
    storage: Storage, user_id: int
) -> None:
    past, now, future = "p".ljust(64, "0"), "n".ljust(64, "0"), "f".ljust(64, "0")
    _add_all(
        storage,
        session_record(past, user_id, expires_at=T0 - 1),
        session_record(now, user_id, expires_at=T0),
        session_record(future, user_id, expires_at=T0 + 1),
    )
    with storage.write() as tx:
        assert tx.sessions.delete_expired(T0) == 2
    assert _present(storage, past, now, future) == [future]
