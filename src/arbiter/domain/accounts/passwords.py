"""Passwords: argon2 behind the `PasswordGuard`, and the steps every part of
accounts shares (an account by name, an approver, the audit entry).

A password guess is throttled per account and per client address before any
argon2 call, and only a few hash at once (the guard's gate). Runs in the
threadpool: argon2 and the database both block.
"""

import logging
import secrets
from collections.abc import Callable

from argon2 import PasswordHasher

from arbiter.domain import actions
from arbiter.domain.credentials import verify_password
from arbiter.domain.errors import InvalidCredentials, NotFound, PermissionDenied, ValidationError
from arbiter.domain.password_guard import PasswordGuard, Throttled
from arbiter.storage import Storage, Tx
from arbiter.storage.base import NewAction
from arbiter.storage.records import UserRecord

log = logging.getLogger("arbiter.accounts")


class Passwords:
    def __init__(
        self,
        storage: Storage,
        hasher: PasswordHasher,
        guard: PasswordGuard,
        clock: Callable[[], float],
    ) -> None:
        self._storage = storage
        self._hasher = hasher
        self.guard = guard
        self._clock = clock
        # What an unknown name's password is checked against: made now, so the
        # first unknown name costs no more (no extra hash) than the next.
        self._dummy_hash = hasher.hash(secrets.token_hex(16))

    def hash(self, password: str) -> str:
        with self.guard.gate.slot():
            return self._hasher.hash(password)

    def _verify(self, password_hash: str, password: str) -> bool:
        with self.guard.gate.slot():
            return verify_password(self._hasher, password_hash, password)

    def prove(
        self, record: UserRecord | None, username: str, password: str, address: str
    ) -> UserRecord:
        """`record` when `password` is its password. Otherwise InvalidCredentials,
        counted against the account and the client address; TooManyAttempts, before
        any argon2, while either must wait. An unknown name (None) is checked
        against a dummy hash: one argon2 verification either way, so the time
        taken tells no names."""
        self.guard.check(username, address)
        password_hash = self._dummy_hash if record is None else record.password_hash
        right = self._verify(password_hash, password)
        if record is None or not right:
            self._count_failure(record, username, address)
            raise InvalidCredentials
        self.guard.succeeded(username, address)
        return record

    def reprove(self, username: str, field: str, password: str, address: str) -> UserRecord:
        """The account of a logged-in user who must type their password again;
        a wrong one is a ValidationError on `field` (and counts as a failure)."""
        with self._storage.read() as tx:
            record = account(tx, username)
        try:
            return self.prove(record, record.username, password, address)
        except InvalidCredentials:
            raise ValidationError(field, "The current password is wrong.") from None

    def rehash_if_needed(self, record: UserRecord, password: str) -> None:
        """Raised argon2 costs reach existing hashes at their owner's next login."""
        if self._hasher.check_needs_rehash(record.password_hash):
            new_hash = self.hash(password)
            with self._storage.write() as tx:
                tx.users.replace_password_hash(record.id, record.password_hash, new_hash)

    def _count_failure(self, record: UserRecord | None, username: str, address: str) -> None:
        """Each failure that starts or lengthens a wait is audited (system_event).
        The audit log is public, so it names the account but not the address (the
        server log does) nor a name that is no account (it may be a mistyped password)."""
        named = username if record is None else record.username
        throttled = self.guard.failed(named, address)
        if not throttled:
            return
        now = self._clock()
        with self._storage.write() as tx:
            for entry in throttled:
                _log_throttled(tx, entry, record, now)


def _log_throttled(tx: Tx, entry: Throttled, record: UserRecord | None, now: float) -> None:
    if entry.scope == "address":
        log.warning(
            "password attempts from %s throttled for %.0f s after %d failures",
            entry.key,
            entry.delay,
            entry.failures,
        )
        subject = "a client address"
    else:
        subject = "an unknown account" if record is None else f"account {record.username}"
    message = (
        f"password attempts throttled: {subject}, {entry.failures} failures, "
        f"next attempt in {entry.delay:.0f} s"
    )
    actions.record(
        tx,
        NewAction(time=now, action="system_event", username=actions.SYSTEM_USER, message=message),
    )


def account(tx: Tx, username: str) -> UserRecord:
    record = tx.users.get_by_key(username)
    if record is None:
        raise NotFound(f"No user named {username}.")
    return record


def approver(tx: Tx, username: str) -> UserRecord:
    record = tx.users.get_by_key(username)
    if record is None or not record.is_approver or record.blocked:
        raise PermissionDenied("Only approvers may manage users.")
    return record


def audit(tx: Tx, action: str, by: UserRecord, target: str, *, message: str, now: float) -> None:
    """`by`'s action on the account `target`, in the audit log."""
    entry = NewAction(time=now, action=action, username=by.username, user=target, message=message)
    actions.record(tx, entry)
