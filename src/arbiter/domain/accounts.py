"""Accounts: signup and approval, login sessions, passwords, worker tokens, blocking.

Every method takes plain values and runs in the threadpool (argon2 and the
database both block). A state change and its audit action commit in one
transaction.
"""

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from argon2 import PasswordHasher

from arbiter.domain import actions
from arbiter.domain.credentials import (
    ProvenWorkers,
    VerifiedSecrets,
    check_password_strength,
    digest,
    is_worker_token,
    new_worker_token,
    verify_password,
)
from arbiter.domain.errors import (
    AccountBlocked,
    AccountPending,
    InvalidCredentials,
    NotFound,
    PermissionDenied,
    ValidationError,
)
from arbiter.domain.profile_fields import (
    check_email,
    check_tests_repo,
    check_token_label,
    check_username,
)
from arbiter.storage import DuplicateKey, Storage, Tx
from arbiter.storage.base import NewUser
from arbiter.storage.records import SessionRecord, TokenRecord, UserRecord

# Writes that only record "still alive" are rate-limited: a busy user or worker
# would otherwise turn every request into a write transaction.
TOUCH_INTERVAL = 600.0
# How long a worker's proven credentials are trusted without the database; a change
# made on another process (a secondary) takes effect on the primary within this.
PROVEN_WORKER_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class User:
    """A user as the rest of the program sees one: never with the password hash."""

    id: int
    username: str
    email: str
    registration_time: float
    pending: bool
    blocked: bool
    is_approver: bool
    tests_repo: str
    machine_limit: int

    @classmethod
    def from_record(cls, record: UserRecord) -> "User":
        return cls(
            id=record.id,
            username=record.username,
            email=record.email,
            registration_time=record.registration_time,
            pending=record.pending,
            blocked=record.blocked,
            is_approver=record.is_approver,
            tests_repo=record.tests_repo,
            machine_limit=record.machine_limit,
        )


@dataclass(frozen=True, slots=True)
class NewSession:
    """A session just started; `session_id` goes into the cookie and nowhere else."""

    session_id: str
    csrf_token: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class ActiveSession:
    user: User
    csrf_token: str
    expires_at: float
    remember: bool


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: int
    label: str
    created_at: float
    last_used: float | None
    revoked_at: float | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @classmethod
    def from_record(cls, record: TokenRecord) -> "TokenInfo":
        return cls(record.id, record.label, record.created_at, record.last_used, record.revoked_at)


class Accounts:
    def __init__(
        self,
        storage: Storage,
        *,
        hasher: PasswordHasher,
        clock: Callable[[], float] = time.time,
        session_hours: int = 12,
        remember_days: int = 400,
    ) -> None:
        self._storage = storage
        self._hasher = hasher
        self._clock = clock
        self._session_seconds = session_hours * 3600.0
        self._remember_seconds = remember_days * 86400.0
        self._verified = VerifiedSecrets()
        self._proven: ProvenWorkers[User] = ProvenWorkers(PROVEN_WORKER_SECONDS, clock)
        self._dummy_hash: str | None = None

    # --- creating and approving accounts ---

    def signup(self, username: str, password: str, email: str, tests_repo: str = "") -> User:
        """A pending account: it can log in once an approver accepts it."""
        return self._add_user(username, password, email, tests_repo, pending=True, approver=False)

    def create_user(
        self, username: str, password: str, *, email: str = "", approver: bool = False
    ) -> User:
        """An active account, for operators (`arbiter users create`)."""
        return self._add_user(username, password, email, "", pending=False, approver=approver)

    def _add_user(
        self,
        username: str,
        password: str,
        email: str,
        tests_repo: str,
        *,
        pending: bool,
        approver: bool,
    ) -> User:
        check_username(username)
        email = check_email(email) if email or pending else ""
        tests_repo = check_tests_repo(tests_repo)
        check_password_strength("password", password, [username, email])
        new_user = NewUser(
            username=username,
            email=email,
            password_hash=self._hasher.hash(password),
            registration_time=self._clock(),
            pending=pending,
            is_approver=approver,
            tests_repo=tests_repo,
        )
        try:
            with self._storage.write() as tx:
                return User.from_record(tx.users.add(new_user))
        except DuplicateKey:
            raise ValidationError("username", "This username is already taken.") from None

    def accept(self, approver: str, username: str) -> None:
        with self._storage.write() as tx:
            by = self._approver(tx, approver)
            user = self._record(tx, username)
            tx.users.set_pending(user.id, False)
            self._log(tx, "accept_user", by, user.username, "accepted")

    def reject(self, approver: str, username: str) -> None:
        """Deletes a pending account; active accounts are blocked instead, never deleted."""
        with self._storage.write() as tx:
            by = self._approver(tx, approver)
            user = self._record(tx, username)
            if not user.pending:
                raise PermissionDenied(
                    f"{user.username} is not pending; block the account instead."
                )
            tx.users.delete(user.id)
            self._log(tx, "reject_user", by, user.username, "rejected")
        self._proven.clear()

    def set_blocked(self, approver: str, username: str, blocked: bool) -> None:
        """Blocking also ends every session and invalidates cached worker secrets."""
        with self._storage.write() as tx:
            by = self._approver(tx, approver)
            user = self._record(tx, username)
            if user.id == by.id:
                raise PermissionDenied("You cannot block yourself.")
            tx.users.set_blocked(user.id, blocked)
            if blocked:
                tx.sessions.delete_for_user(user.id)
            self._log(tx, "block_user", by, user.username, "blocked" if blocked else "unblocked")
        self._proven.clear()

    # --- reading ---

    def get_user(self, username: str) -> User | None:
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
        return None if record is None else User.from_record(record)

    def list_users(self, *, pending: bool | None = None, blocked: bool | None = None) -> list[User]:
        with self._storage.read() as tx:
            return [User.from_record(r) for r in tx.users.list(pending=pending, blocked=blocked)]

    # --- proving who you are ---

    def authenticate(self, username: str, password: str) -> User:
        """Login by password. Wrong name and wrong password are indistinguishable."""
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
        if record is None:
            # Spend the same time as a real check, so timing reveals no names.
            verify_password(self._hasher, self._dummy(), password)
            raise InvalidCredentials
        if not verify_password(self._hasher, record.password_hash, password):
            raise InvalidCredentials
        self._rehash_if_needed(record, password)
        return self._usable(record)

    def proven_worker(self, username: str, secret: str) -> User | None:
        """The account these worker credentials proved recently, from memory; None
        when they must be checked (`authenticate_worker`). Safe on the event loop."""
        return self._proven.get(username, secret)

    def authenticate_worker(self, username: str, secret: str) -> User:
        """A worker's credentials: a worker token (`arb_...`) or the password."""
        user = self._authenticate_worker(username, secret)
        self._proven.add(username, secret, user)
        return user

    def _authenticate_worker(self, username: str, secret: str) -> User:
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
            token = tx.tokens.get_by_hash(digest(secret)) if is_worker_token(secret) else None
        if record is None:
            raise InvalidCredentials
        if is_worker_token(secret):
            if token is None or token.user_id != record.id or token.revoked_at is not None:
                raise InvalidCredentials
            self._touch_token(token)
        elif not self._verified.contains(record.id, record.credentials_version, secret):
            if not verify_password(self._hasher, record.password_hash, secret):
                raise InvalidCredentials
            # Remember only usable accounts: a pending one may be rejected (deleted) and
            # SQLite can hand its id to the next account, which the entry would then open.
            self._usable(record)
            self._verified.add(record.id, record.credentials_version, secret)
        return self._usable(record)

    def authenticate_token(self, token: str) -> User:
        """A bearer token alone (scripting API): the token names its user."""
        if not is_worker_token(token):
            raise InvalidCredentials("Invalid or revoked token.")
        with self._storage.read() as tx:
            found = tx.tokens.get_by_hash(digest(token))
            record = None if found is None else tx.users.get_by_id(found.user_id)
        if found is None or record is None or found.revoked_at is not None:
            raise InvalidCredentials("Invalid or revoked token.")
        self._touch_token(found)
        return self._usable(record)

    def _usable(self, record: UserRecord) -> User:
        if record.blocked:
            raise AccountBlocked
        if record.pending:
            raise AccountPending
        return User.from_record(record)

    def _rehash_if_needed(self, record: UserRecord, password: str) -> None:
        """Raised argon2 costs reach existing hashes at their owner's next login."""
        if self._hasher.check_needs_rehash(record.password_hash):
            new_hash = self._hasher.hash(password)
            with self._storage.write() as tx:
                tx.users.replace_password_hash(record.id, record.password_hash, new_hash)

    def _touch_token(self, token: TokenRecord) -> None:
        now = self._clock()
        if token.last_used is None or now - token.last_used > TOUCH_INTERVAL:
            with self._storage.write() as tx:
                tx.tokens.touch(token.id, now)

    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = self._hasher.hash(secrets.token_hex(16))
        return self._dummy_hash

    # --- browser sessions ---

    def start_session(self, user: User, *, remember: bool) -> NewSession:
        now = self._clock()
        lifetime = self._remember_seconds if remember else self._session_seconds
        session_id = secrets.token_urlsafe(32)
        record = SessionRecord(
            id_hash=digest(session_id),
            user_id=user.id,
            created_at=now,
            last_seen=now,
            expires_at=now + lifetime,
            remember=remember,
            csrf_token=secrets.token_hex(32),
        )
        with self._storage.write() as tx:
            tx.sessions.add(record)
        return NewSession(session_id, record.csrf_token, record.expires_at)

    def resolve_session(self, session_id: str) -> ActiveSession | None:
        """The live session this cookie names, or None (expired, logged out, blocked)."""
        now = self._clock()
        with self._storage.read() as tx:
            session = tx.sessions.get(digest(session_id))
            record = None if session is None else tx.users.get_by_id(session.user_id)
        if session is None or record is None or session.expires_at <= now or record.blocked:
            return None
        if now - session.last_seen > TOUCH_INTERVAL:
            with self._storage.write() as tx:
                tx.sessions.touch(session.id_hash, now)
        user = User.from_record(record)
        return ActiveSession(user, session.csrf_token, session.expires_at, session.remember)

    def end_session(self, session_id: str) -> None:
        with self._storage.write() as tx:
            tx.sessions.delete(digest(session_id))

    def purge_expired_sessions(self) -> int:
        with self._storage.write() as tx:
            return tx.sessions.delete_expired(self._clock())

    # --- the user's own settings ---

    def change_password(
        self, username: str, old_password: str, new_password: str, *, keep_session_id: str = ""
    ) -> None:
        """Ends every other session of the user; cached worker secrets die too."""
        with self._storage.read() as tx:
            record = self._record(tx, username)
        if not verify_password(self._hasher, record.password_hash, old_password):
            raise ValidationError("old_password", "The current password is wrong.")
        check_password_strength("new_password", new_password, [record.username, record.email])
        new_hash = self._hasher.hash(new_password)
        with self._storage.write() as tx:
            tx.users.set_password_hash(record.id, new_hash, new_secret=True)
            keep = digest(keep_session_id) if keep_session_id else None
            tx.sessions.delete_for_user(record.id, keep_id_hash=keep)
        self._proven.clear()

    def update_profile(self, username: str, *, email: str, tests_repo: str) -> None:
        email, tests_repo = check_email(email), check_tests_repo(tests_repo)
        with self._storage.write() as tx:
            record = self._record(tx, username)
            tx.users.update_profile(record.id, email=email, tests_repo=tests_repo)

    # --- worker tokens ---

    def create_token(self, username: str, label: str = "") -> str:
        """A new worker token, returned once: only its digest is kept."""
        label = check_token_label(label)
        token = new_worker_token()
        with self._storage.write() as tx:
            record = self._record(tx, username)
            tx.tokens.add(
                user_id=record.id, label=label, token_hash=digest(token), created_at=self._clock()
            )
        return token

    def list_tokens(self, username: str) -> list[TokenInfo]:
        with self._storage.read() as tx:
            record = self._record(tx, username)
            return [TokenInfo.from_record(t) for t in tx.tokens.list_for_user(record.id)]

    def revoke_token(self, username: str, token_id: int) -> None:
        with self._storage.write() as tx:
            record = self._record(tx, username)
            if not tx.tokens.revoke(user_id=record.id, token_id=token_id, at=self._clock()):
                raise NotFound("No such token.")
        self._proven.clear()

    # --- shared steps ---

    def _record(self, tx: Tx, username: str) -> UserRecord:
        record = tx.users.get_by_key(username)
        if record is None:
            raise NotFound(f"No user named {username}.")
        return record

    def _approver(self, tx: Tx, username: str) -> UserRecord:
        record = tx.users.get_by_key(username)
        if record is None or not record.is_approver or record.blocked:
            raise PermissionDenied("Only approvers may manage users.")
        return record

    def _log(self, tx: Tx, action: str, by: UserRecord, target: str, message: str) -> None:
        now = self._clock()
        actions.record(
            tx, time=now, action=action, username=by.username, user=target, message=message
        )
