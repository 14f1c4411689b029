"""The worker token store: digests only, revocable, owned by one user."""

import pytest

from arbiter.storage import DuplicateKey, Storage
from tests.storage.support import T0, add_token, add_user

HASH_1 = "1" * 64
HASH_2 = "2" * 64


@pytest.fixture
def user_id(storage: Storage) -> int:
    return add_user(storage, "alice").id


def test_add_returns_a_fresh_record(storage: Storage, user_id: int) -> None:
    with storage.write() as tx:
        token = tx.tokens.add(user_id=user_id, label="box", token_hash=HASH_1, created_at=T0)
    assert token.id > 0
    assert token.user_id == user_id
    assert token.label == "box"
    assert token.token_hash == HASH_1
    assert token.created_at == T0
    assert token.last_used is None
    assert token.revoked_at is None


def test_get_by_hash(storage: Storage, user_id: int) -> None:
    token_id = add_token(storage, user_id, HASH_1)
    with storage.read() as tx:
        found = tx.tokens.get_by_hash(HASH_1)
        assert tx.tokens.get_by_hash(HASH_2) is None
    assert found is not None
    assert found.id == token_id


def test_same_hash_twice_raises_duplicate_key_without_the_hash(
    storage: Storage, user_id: int
) -> None:
    add_token(storage, user_id, HASH_1)
    with pytest.raises(DuplicateKey) as raised:
        add_token(storage, user_id, HASH_1)
    assert raised.value.what == "token"
    assert HASH_1 not in str(raised.value)


def test_list_for_user_in_creation_order_and_only_theirs(storage: Storage, user_id: int) -> None:
    bob = add_user(storage, "bob").id
    first = add_token(storage, user_id, HASH_2, label="first")
    add_token(storage, bob, "3" * 64)
    second = add_token(storage, user_id, HASH_1, label="second")
    with storage.read() as tx:
        tokens = tx.tokens.list_for_user(user_id)
    assert [(t.id, t.label) for t in tokens] == [(first, "first"), (second, "second")]


def test_touch_records_last_use(storage: Storage, user_id: int) -> None:
    token_id = add_token(storage, user_id, HASH_1)
    with storage.write() as tx:
        tx.tokens.touch(token_id, T0 + 5)
    with storage.read() as tx:
        token = tx.tokens.get_by_hash(HASH_1)
    assert token is not None
    assert token.last_used == T0 + 5


def test_revoke_own_token(storage: Storage, user_id: int) -> None:
    token_id = add_token(storage, user_id, HASH_1)
    with storage.write() as tx:
        assert tx.tokens.revoke(user_id=user_id, token_id=token_id, at=T0 + 10)
    with storage.read() as tx:
        token = tx.tokens.get_by_hash(HASH_1)
    assert token is not None
    assert token.revoked_at == T0 + 10


def test_revoke_someone_elses_token_is_refused(storage: Storage, user_id: int) -> None:
    bob = add_user(storage, "bob").id
    token_id = add_token(storage, bob, HASH_1)
    with storage.write() as tx:
        assert not tx.tokens.revoke(user_id=user_id, token_id=token_id, at=T0 + 10)
    with storage.read() as tx:
        token = tx.tokens.get_by_hash(HASH_1)
    assert token is not None
    assert token.revoked_at is None


def test_revoke_unknown_token_is_false(storage: Storage, user_id: int) -> None:
    with storage.write() as tx:
        assert not tx.tokens.revoke(user_id=user_id, token_id=999, at=T0)


def test_revoking_twice_keeps_the_first_time(storage: Storage, user_id: int) -> None:
    token_id = add_token(storage, user_id, HASH_1)
    with storage.write() as tx:
        assert tx.tokens.revoke(user_id=user_id, token_id=token_id, at=T0 + 10)
        assert tx.tokens.revoke(user_id=user_id, token_id=token_id, at=T0 + 20)
    with storage.read() as tx:
        token = tx.tokens.get_by_hash(HASH_1)
    assert token is not None
    assert token.revoked_at == T0 + 10
