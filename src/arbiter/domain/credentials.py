"""Passwords and worker tokens: hashing, strength, and a cache of verified secrets.

argon2id makes each password check cost ~20 MiB and tens of milliseconds on
purpose; 10,000 workers each calling every few seconds could not afford it. A
worker that proved its secret once is remembered by a SHA-256 of that secret,
keyed by the user's `credentials_version`, which every password change or block
bumps, so a stale entry can never match again.

All functions here are CPU-bound and run in the threadpool.
"""

import hashlib
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from zxcvbn import zxcvbn

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


T = TypeVar("T")


class VerifiedSecrets:
    """A bounded, thread-safe LRU set of secrets already proven right."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[int, int, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def contains(self, user_id: int, credentials_version: int, secret: str) -> bool:
        key = (user_id, credentials_version, digest(secret))
        with self._lock:
            if key not in self._entries:
                return False
            self._entries.move_to_end(key)
            return True

    def add(self, user_id: int, credentials_version: int, secret: str) -> None:
        key = (user_id, credentials_version, digest(secret))
        with self._lock:
            self._entries[key] = None
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)


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
