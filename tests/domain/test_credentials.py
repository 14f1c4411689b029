"""Passwords and worker tokens: strength, hashing, and the cache of verified secrets."""

import hashlib

import pytest

from arbiter.domain.credentials import (
    MAX_PASSWORD_LENGTH,
    TOKEN_PREFIX,
    ProvenWorkers,
    WorkerProofs,
    check_password_strength,
    digest,
    is_worker_token,
    new_worker_token,
    verify_password,
)
from arbiter.domain.errors import ValidationError
from tests.domain.support import OTHER_PASSWORD, PASSWORD, WEAK_PASSWORD, cheap_hasher


def test_worker_tokens_carry_the_prefix_and_256_bits() -> None:
    token = new_worker_token()
    assert token.startswith(TOKEN_PREFIX)
    assert TOKEN_PREFIX == "arb_"
    assert len(token) == len("arb_") + 43  # 32 random bytes, URL-safe base64
    assert is_worker_token(token)


def test_worker_tokens_are_unique() -> None:
    assert len({new_worker_token() for _ in range(100)}) == 100


@pytest.mark.parametrize("secret", ["", PASSWORD, "ARB_x", "xarb_"])
def test_only_prefixed_secrets_are_worker_tokens(secret: str) -> None:
    assert not is_worker_token(secret)


def test_digest_is_sha256_hex() -> None:
    assert digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert digest("é") == hashlib.sha256("é".encode()).hexdigest()


def test_strong_password_passes() -> None:
    check_password_strength("password", PASSWORD, ["alice", "alice@example.org"])


def test_empty_password_is_refused_on_the_given_field() -> None:
    with pytest.raises(ValidationError, match="Enter a password") as raised:
        check_password_strength("new_password", "", [])
    assert raised.value.field == "new_password"


def test_password_length_is_limited() -> None:
    check_password_strength("password", (PASSWORD * 3)[:MAX_PASSWORD_LENGTH], [])
    with pytest.raises(ValidationError, match="at most 72 characters") as raised:
        check_password_strength("password", (PASSWORD * 3)[: MAX_PASSWORD_LENGTH + 1], [])
    assert raised.value.field == "password"


def test_guessable_password_is_refused_with_a_hint() -> None:
    with pytest.raises(ValidationError) as raised:
        check_password_strength("password", WEAK_PASSWORD, [])
    message = str(raised.value)
    assert message.startswith("This password is too easy to guess.")
    assert len(message) > len("This password is too easy to guess.")


def test_password_made_of_the_users_own_details_is_refused() -> None:
    check_password_strength("password", OTHER_PASSWORD, [])
    with pytest.raises(ValidationError):
        check_password_strength("password", OTHER_PASSWORD, ["", OTHER_PASSWORD])


def test_verify_password() -> None:
    hasher = cheap_hasher()
    password_hash = hasher.hash(PASSWORD)
    assert verify_password(hasher, password_hash, PASSWORD)
    assert not verify_password(hasher, password_hash, OTHER_PASSWORD)
    assert not verify_password(hasher, password_hash, "")


@pytest.mark.parametrize("password_hash", ["", "unused", "$argon2id$v=19$garbage"])
def test_verify_password_against_a_broken_hash_is_false(password_hash: str) -> None:
    assert not verify_password(cheap_hasher(), password_hash, PASSWORD)


def test_a_worker_proof_is_bound_to_every_field_and_the_key() -> None:
    proofs = WorkerProofs(b"k" * 32)
    proof = proofs.of(1, 0, "$argon2id$h", PASSWORD)
    assert proofs.matches(proof, 1, 0, "$argon2id$h", PASSWORD)
    for other in (
        (2, 0, "$argon2id$h", PASSWORD),
        (1, 1, "$argon2id$h", PASSWORD),
        (1, 0, "$argon2id$other", PASSWORD),
        (1, 0, "$argon2id$h", OTHER_PASSWORD),
    ):
        assert not proofs.matches(proof, *other)
    assert not WorkerProofs(b"j" * 32).matches(proof, 1, 0, "$argon2id$h", PASSWORD)
    assert not proofs.matches(None, 1, 0, "$argon2id$h", PASSWORD)
    assert not proofs.matches("", 1, 0, "$argon2id$h", PASSWORD)


def test_a_worker_proof_key_is_long_enough() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        WorkerProofs(b"short")
    assert WorkerProofs.ephemeral().of(1, 0, "h", "p") != WorkerProofs.ephemeral().of(
        1, 0, "h", "p"
    )


def test_proven_workers_expire_after_their_ttl() -> None:
    now = [1000.0]
    proven: ProvenWorkers[str] = ProvenWorkers(60.0, lambda: now[0])
    proven.add("alice", "secret", "alice's account")
    assert proven.get("alice", "secret") == "alice's account"
    assert proven.get("alice", "other") is None
    assert proven.get("bob", "secret") is None
    now[0] += 60.5
    assert proven.get("alice", "secret") is None


def test_proven_workers_stay_bounded() -> None:
    proven: ProvenWorkers[int] = ProvenWorkers(60.0, lambda: 0.0, capacity=3)
    for number in range(10):
        proven.add(f"user{number}", "secret", number)
    assert proven.get("user9", "secret") == 9
    assert sum(proven.get(f"user{n}", "secret") is not None for n in range(10)) <= 3
