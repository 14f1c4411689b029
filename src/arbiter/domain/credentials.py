"""Passwords and worker tokens: hashing, strength, and proofs of verified secrets.

argon2id makes each password check cost ~20 MiB and tens of milliseconds on
purpose; 10,000 workers each calling every few seconds could not afford it,
nor could a restarted server that all of them reconnect to at once. So once
argon2 has verified a worker's password, the account keeps a *worker proof*:
HMAC-SHA256 of the password under a key that is not in the database (a file
beside it, `WorkerProofs`), bound to the account's id, password hash and
`credentials_version` (which every password change or block bumps), so a
stale proof can never match again. A returning worker is then checked with
one MAC, before and after a restart. A copy of the database without the key
tells nothing: no guess can be tested against a proof without the key.

All functions here are CPU-bound and run in the threadpool.
"""

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from arbiter.domain.errors import ValidationError

TOKEN_PREFIX = "arb_"  # noqa: S105 - a marker, not a secret
MAX_PASSWORD_LENGTH = 72  # as the reference; also bounds zxcvbn's run time
MIN_PASSWORD_SCORE = 3  # zxcvbn's "safely unguessable"


def new_worker_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def is_worker_token(secret: str) -> bool:
    return secret.startswith(TOKEN_PREFIX)


def digest(secret: str) -> str:
    """SHA-256 hex: how tokens and session ids are stored, never in clear."""
    return hashlib.sha256(secret.encode()).hexdigest()


def check_password_strength(field: str, password: str, context: list[str]) -> None:
    """Raise ValidationError on `field` unless the password is long and unguessable.

    `context` holds the username and email: a password built from them is weak.
    """
    if not password:
        raise ValidationError(field, "Enter a password.")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ValidationError(field, f"Use at most {MAX_PASSWORD_LENGTH} characters.")
    from zxcvbn import zxcvbn  # here: its word lists take a tenth of start-up to load

    verdict = zxcvbn(password, user_inputs=[item for item in context if item])
    if verdict["score"] < MIN_PASSWORD_SCORE:
        feedback = verdict["feedback"]
        hint = feedback.get("warning") or " ".join(feedback.get("suggestions", []))
        message = "This password is too easy to guess."
        raise ValidationError(field, f"{message} {hint}".strip())


def verify_password(hasher: PasswordHasher, password_hash: str, password: str) -> bool:
    try:
        return hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


class WorkerProofs:
    """Worker proofs under one key (32 random bytes at least)."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("a worker proof key has at least 32 bytes")
        self._key = key

    @classmethod
    def ephemeral(cls) -> "WorkerProofs":
        """A key of this process alone: proofs then last until it ends."""
        return cls(secrets.token_bytes(32))

    def of(self, user_id: int, credentials_version: int, password_hash: str, password: str) -> str:
        # The fixed fields first, each ended by a separator that none contains,
        # then the password: no two inputs share a message.
        message = f"{user_id}\0{credentials_version}\0{password_hash}\0{password}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def matches(
        self,
        stored: str | None,
        user_id: int,
        credentials_version: int,
        password_hash: str,
        password: str,
    ) -> bool:
        if not stored:
            return False
        proof = self.of(user_id, credentials_version, password_hash, password)
        return hmac.compare_digest(stored, proof)


T = TypeVar("T")


class ProvenWorkers(Generic[T]):
    """Workers whose credentials were checked in the last `ttl` seconds, with the
    account they proved (username and secret digest -> value).

    This lets the hot worker calls skip the database: a beat is then answered
    from memory alone. Anything that could make a proof wrong (a block, a
    revoked token, a new password) clears it on this process; a change made by
    another process (a secondary's account pages) reaches it within `ttl`.
    Lookups are dict reads under a lock never held for I/O, cheap enough for the
    event loop.
    """

    def __init__(self, ttl: float, clock: Callable[[], float], capacity: int = 100_000) -> None:
        self._ttl = ttl
        self._clock = clock
        self._capacity = capacity
        self._entries: dict[tuple[str, str], tuple[T, float]] = {}
        self._lock = threading.Lock()

    def get(self, username: str, secret: str) -> T | None:
        key = (username, digest(secret))
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or self._clock() - entry[1] > self._ttl:
            return None
        return entry[0]

    def add(self, username: str, secret: str, value: T) -> None:
        key = (username, digest(secret))
        with self._lock:
            if len(self._entries) >= self._capacity:
                self._entries.clear()  # rare; everyone proves themselves once more
            self._entries[key] = (value, self._clock())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
