"""The user store: one account per case-insensitive name, credentials versioning."""

import pytest

from arbiter.storage import DuplicateKey, Storage
from tests.storage.support import T0, add_token, add_user, new_user, session_record


def test_add_returns_the_stored_record_with_defaults(storage: Storage) -> None:
    with storage.write() as tx:
        user = tx.users.add(
            new_user("Alice", pending=True, is_approver=True, tests_repo="https://x.org/a/b")
        )
    assert user.id > 0
    assert user.username == "Alice"
    assert user.username_key == "alice"
    assert user.email == "alice@example.org"
    assert user.password_hash == "hash-of-Alice"
    assert user.registration_time == T0
    assert user.pending is True
    assert user.blocked is False
    assert user.is_approver is True
    assert user.tests_repo == "https://x.org/a/b"
    assert user.machine_limit == 16
    assert user.credentials_version == 0


def test_get_by_name_is_exact_and_get_by_key_ignores_case(storage: Storage) -> None:
    alice = add_user(storage, "Alice")
    with storage.read() as tx:
        assert tx.users.get("Alice") == alice
        assert tx.users.get("alice") is None
        assert tx.users.get_by_key("ALICE") == alice
        assert tx.users.get_by_key("alice") == alice
        assert tx.users.get_by_id(alice.id) == alice


def test_lookups_of_missing_users_return_none(storage: Storage) -> None:
    with storage.read() as tx:
        assert tx.users.get("nobody") is None
        assert tx.users.get_by_key("nobody") is None
        assert tx.users.get_by_id(12345) is None


def test_list_is_ordered_by_case_folded_name(storage: Storage) -> None:
    for name in ("carol", "Bob", "alice"):
        add_user(storage, name)
    with storage.read() as tx:
        assert [u.username for u in tx.users.list()] == ["alice", "Bob", "carol"]


def test_list_filters_by_pending_and_blocked(storage: Storage) -> None:
    add_user(storage, "active")
    add_user(storage, "waiting", pending=True)
    blocked = add_user(storage, "banned")
    with storage.write() as tx:
        tx.users.set_blocked(blocked.id, True)
    with storage.read() as tx:
        assert [u.username for u in tx.users.list(pending=True)] == ["waiting"]
        assert [u.username for u in tx.users.list(pending=False)] == ["active", "banned"]
        assert [u.username for u in tx.users.list(blocked=True)] == ["banned"]
        assert [u.username for u in tx.users.list(pending=False, blocked=False)] == ["active"]


@pytest.mark.parametrize("taken_as", ["alice", "ALICE", "aLiCe"])
def test_username_taken_in_any_case_raises_duplicate_key(storage: Storage, taken_as: str) -> None:
    add_user(storage, "Alice")
    with pytest.raises(DuplicateKey) as raised, storage.write() as tx:
        tx.users.add(new_user(taken_as))
    assert raised.value.what == "username"
    assert raised.value.value == taken_as


def test_transaction_continues_after_a_duplicate_key(storage: Storage) -> None:
    with storage.write() as tx:
        tx.users.add(new_user("alice"))
        with pytest.raises(DuplicateKey):
            tx.users.add(new_user("Alice"))
        tx.users.add(new_user("bob"))
    with storage.read() as tx:
        assert [u.username for u in tx.users.list()] == ["alice", "bob"]


def test_set_pending(storage: Storage) -> None:
    user = add_user(storage, "alice", pending=True)
    with storage.write() as tx:
        tx.users.set_pending(user.id, False)
    with storage.read() as tx:
        stored = tx.users.get_by_id(user.id)
    assert stored is not None
    assert stored.pending is False
    assert stored.credentials_version == 0


def test_set_blocked_bumps_credentials_version_both_ways(storage: Storage) -> None:
    user = add_user(storage, "alice")
    with storage.write() as tx:
        tx.users.set_blocked(user.id, True)
        blocked = tx.users.get_by_id(user.id)
        tx.users.set_blocked(user.id, False)
        unblocked = tx.users.get_by_id(user.id)
    assert blocked is not None
    assert unblocked is not None
    assert (blocked.blocked, blocked.credentials_version) == (True, 1)
    assert (unblocked.blocked, unblocked.credentials_version) == (False, 2)


def test_new_password_hash_bumps_credentials_version(storage: Storage) -> None:
    user = add_user(storage, "alice")
    with storage.write() as tx:
        tx.users.set_password_hash(user.id, "new-hash", new_secret=True)
    with storage.read() as tx:
        stored = tx.users.get_by_id(user.id)
    assert stored is not None
    assert stored.password_hash == "new-hash"
    assert stored.credentials_version == 1


def test_rehash_keeps_credentials_version(storage: Storage) -> None:
    user = add_user(storage, "alice")
    with storage.write() as tx:
        tx.users.set_password_hash(user.id, "rehashed", new_secret=False)
    with storage.read() as tx:
        stored = tx.users.get_by_id(user.id)
    assert stored is not None
    assert stored.password_hash == "rehashed"
    assert stored.credentials_version == 0


def test_replace_password_hash_swaps_when_old_hash_matches(storage: Storage) -> None:
    user = add_user(storage, "alice")
    with storage.write() as tx:
        assert tx.users.replace_password_hash(user.id, user.password_hash, "rehashed")
    with storage.read() as tx:
        stored = tx.users.get_by_id(user.id)
    assert stored is not None
    assert stored.password_hash == "rehashed"
    assert stored.credentials_version == 0


def test_replace_password_hash_refuses_when_hash_changed_meanwhile(storage: Storage) -> None:
    user = add_user(storage, "alice")
    with storage.write() as tx:
        tx.users.set_password_hash(user.id, "changed", new_secret=True)
        assert not tx.users.replace_password_hash(user.id, user.password_hash, "rehashed")
    with storage.read() as tx:
        stored = tx.users.get_by_id(user.id)
    assert stored is not None
    assert stored.password_hash == "changed"


def test_update_profile_changes_only_the_given_fields(storage: Storage) -> None:
    user = add_user(storage, "alice", tests_repo="https://x.org/a/b")
    with storage.write() as tx:
        tx.users.update_profile(user.id, email="new@example.org")
        after_email = tx.users.get_by_id(user.id)
        tx.users.update_profile(user.id, tests_repo="")
        after_repo = tx.users.get_by_id(user.id)
        tx.users.update_profile(user.id)
        after_nothing = tx.users.get_by_id(user.id)
    assert after_email is not None
    assert (after_email.email, after_email.tests_repo) == ("new@example.org", "https://x.org/a/b")
    assert after_repo is not None
    assert (after_repo.email, after_repo.tests_repo) == ("new@example.org", "")
    assert after_nothing == after_repo


def test_delete_removes_the_user(storage: Storage) -> None:
    user = add_user(storage, "alice")
    with storage.write() as tx:
        assert tx.users.delete(user.id)
        assert not tx.users.delete(user.id)
    with storage.read() as tx:
        assert tx.users.get_by_id(user.id) is None
        assert tx.users.list() == []


def test_delete_removes_sessions_and_tokens_of_that_user_only(storage: Storage) -> None:
    alice = add_user(storage, "alice")
    bob = add_user(storage, "bob")
    with storage.write() as tx:
        tx.sessions.add(session_record("a" * 64, alice.id))
        tx.sessions.add(session_record("b" * 64, bob.id))
    add_token(storage, alice.id, "1" * 64)
    add_token(storage, bob.id, "2" * 64)
    with storage.write() as tx:
        tx.users.delete(alice.id)
    with storage.read() as tx:
        assert tx.sessions.get("a" * 64) is None
        assert tx.tokens.get_by_hash("1" * 64) is None
        assert tx.tokens.list_for_user(alice.id) == []
        assert tx.sessions.get("b" * 64) is not None
        assert tx.tokens.get_by_hash("2" * 64) is not None


def test_deleted_name_can_register_again(storage: Storage) -> None:
    user = add_user(storage, "alice")
    with storage.write() as tx:
        tx.users.delete(user.id)
    again = add_user(storage, "ALICE")
    assert again.username_key == "alice"
