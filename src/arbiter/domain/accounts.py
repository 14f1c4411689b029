"""Accounts: signup and approval, login sessions, passwords, worker tokens, blocking.

Every method takes plain values and runs in the threadpool (argon2 and the
database both block). A state change and its audit action commit in one
transaction. Every argon2 call passes the `PasswordGuard`: a password guess is
throttled per account and per client address, and only a few hash at once.
"""

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from argon2 import PasswordHasher

from arbiter.domain import actions
from arbiter.domain.credentials import (
    ProvenWorkers,
    WorkerProofs,
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
from arbiter.domain.password_guard import PasswordGuard, Throttled
from arbiter.domain.profile_fields import (
    check_email,
    check_tests_repo,
    check_token_label,
    check_username,
)
from arbiter.storage import DuplicateKey, Storage, Tx
from arbiter.storage.base import NewAction, NewUser
from arbiter.storage.records import SessionRecord, TokenRecord, UserRecord

log = logging.getLogger("arbiter.accounts")

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
        guard: PasswordGuard | None = None,
        worker_proofs: WorkerProofs | None = None,
    ) -> None:
        self._storage = storage
        self._hasher = hasher
        self._clock = clock
        # Public: its gate is this process's bound on argon2 calls at once.
        self.guard = guard or PasswordGuard(clock=clock)
        self._session_seconds = session_hours * 3600.0
        self._remember_seconds = remember_days * 86400.0
        self._proofs = worker_proofs or WorkerProofs.ephemeral()
        self._proven: ProvenWorkers[User] = ProvenWorkers(PROVEN_WORKER_SECONDS, clock)
        # What an unknown name's password is checked against: made now, so the
        # first unknown name costs no more (no extra hash) than the next.
        self._dummy_hash = hasher.hash(secrets.token_hex(16))

    # --- creating and approving accounts ---

    def signup(
        self, username: str, password: str, email: str, tests_repo: str = "", *, address: str = ""
    ) -> User:
        """A pending account: it can log in once an approver accepts it. Signups
        that get as far as hashing are counted per client `address` (TooManyAttempts
        beyond the hourly limit; no address, no count)."""
        return self._add_user(
            username, password, email, tests_repo, pending=True, approver=False, address=address
        )

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
        address: str = "",
    ) -> User:
        check_username(username)
        email = check_email(email) if email or pending else ""
        tests_repo = check_tests_repo(tests_repo)
        check_password_strength("password", password, [username, email])
        if address:
            self.guard.take_signup(address)
        new_user = NewUser(
            username=username,
            email=email,
            password_hash=self._hash(password),
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

    def authenticate(self, username: str, password: str, *, address: str = "") -> User:
        """Login by password from a client `address`. Wrong name and wrong password
        are indistinguishable, in their message and in their cost."""
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
        record = self._prove_password(record, username, password, address)
        self._rehash_if_needed(record, password)
        return self._usable(record)

    def proven_worker(self, username: str, secret: str) -> User | None:
        """The account these worker credentials proved recently, from memory; None
        when they must be checked (`authenticate_worker`). Safe on the event loop."""
        return self._proven.get(username, secret)

    def authenticate_worker(self, username: str, secret: str, address: str = "") -> User:
        """A worker's credentials: a worker token (`arb_...`), checked by its SHA-256
        and never throttled, or the password, throttled like a login when argon2
        must check it (a secret already verified is not a guess)."""
        if is_worker_token(secret):
            user = self._worker_by_token(username, secret)
        else:
            user = self._worker_by_password(username, secret, address)
        self._proven.add(username, secret, user)
        return user

    def _worker_by_token(self, username: str, token: str) -> User:
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
            found = tx.tokens.get_by_hash(digest(token))
        if record is None or found is None:
            raise InvalidCredentials
        if found.user_id != record.id or found.revoked_at is not None:
            raise InvalidCredentials
        self._touch_token(found)
        return self._usable(record)

    def _worker_by_password(self, username: str, password: str, address: str) -> User:
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
        if record is not None and self._proof_matches(record, password):
            return self._usable(record)  # verified before, by this process or another
        record = self._prove_password(record, username, password, address)
        user = self._usable(record)  # a blocked or pending account keeps no proof
        self._keep_proof(record, password)
        return user

    def _proof_matches(self, record: UserRecord, password: str) -> bool:
        return self._proofs.matches(
            record.worker_proof,
            record.id,
            record.credentials_version,
            record.password_hash,
            password,
        )

    def _keep_proof(self, record: UserRecord, password: str) -> None:
        """Store the proof of a password argon2 just verified (unless it is there
        already, as after a restart with the same key): one write per account,
        not per worker."""
        proof = self._proofs.of(
            record.id, record.credentials_version, record.password_hash, password
        )
        if record.worker_proof != proof:
            with self._storage.write() as tx:
                tx.users.set_worker_proof(record.id, proof)

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
            new_hash = self._hash(password)
            with self._storage.write() as tx:
                tx.users.replace_password_hash(record.id, record.password_hash, new_hash)

    def _touch_token(self, token: TokenRecord) -> None:
        now = self._clock()
        if token.last_used is None or now - token.last_used > TOUCH_INTERVAL:
            with self._storage.write() as tx:
                tx.tokens.touch(token.id, now)

    # --- argon2, behind the guard ---

    def _prove_password(
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
                self._log_throttled(tx, entry, record, now)

    def _log_throttled(
        self, tx: Tx, entry: Throttled, record: UserRecord | None, now: float
    ) -> None:
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
        actions.record(
            tx,
            NewAction(
                time=now,
                action="system_event",
                username=actions.SYSTEM_USER,
                message=(
                    f"password attempts throttled: {subject}, {entry.failures} failures, "
                    f"next attempt in {entry.delay:.0f} s"
                ),
            ),
        )

    def _hash(self, password: str) -> str:
        with self.guard.gate.slot():
            return self._hasher.hash(password)

    def _verify(self, password_hash: str, password: str) -> bool:
        with self.guard.gate.slot():
            return verify_password(self._hasher, password_hash, password)

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
        self,
        username: str,
        old_password: str,
        new_password: str,
        *,
        keep_session_id: str = "",
        revoke_tokens: bool = False,
        address: str = "",
    ) -> None:
        """Ends every session of the user but `keep_session_id`, and with
        `revoke_tokens` every worker token too (a token made from a stolen session
        must not outlive the password); cached worker secrets die either way.
        A wrong old password is a guess, throttled as a login from `address`."""
        record = self._reprove(username, "old_password", old_password, address)
        check_password_strength("new_password", new_password, [record.username, record.email])
        new_hash = self._hash(new_password)
        with self._storage.write() as tx:
            tx.users.set_password_hash(record.id, new_hash, new_secret=True)
            keep = digest(keep_session_id) if keep_session_id else None
            tx.sessions.delete_for_user(record.id, keep_id_hash=keep)
            if revoke_tokens:
                tx.tokens.revoke_all(user_id=record.id, at=self._clock())
        self._proven.clear()

    def update_profile(self, username: str, *, email: str, tests_repo: str) -> None:
        email, tests_repo = check_email(email), check_tests_repo(tests_repo)
        with self._storage.write() as tx:
            record = self._record(tx, username)
            tx.users.update_profile(record.id, email=email, tests_repo=tests_repo)

    # --- worker tokens ---

    def create_own_token(
        self, username: str, password: str, label: str = "", *, address: str = ""
    ) -> str:
        """A user's new worker token, made only with their current password: a
        stolen session alone cannot mint lasting credentials."""
        label = check_token_label(label)
        self._reprove(username, "current_password", password, address)
        return self.create_token(username, label)

    def create_token(self, username: str, label: str = "") -> str:
        """A new worker token, returned once: only its digest is kept. No password
        asked: for operators (`arbiter users token`); users go through
        `create_own_token`."""
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

    def _reprove(self, username: str, field: str, password: str, address: str) -> UserRecord:
        """The account of a logged-in user who must type their password again;
        a wrong one is a ValidationError on `field` (and counts as a failure)."""
        with self._storage.read() as tx:
            record = self._record(tx, username)
        try:
            return self._prove_password(record, record.username, password, address)
        except InvalidCredentials:
            raise ValidationError(field, "The current password is wrong.") from None

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
            tx,
            NewAction(time=now, action=action, username=by.username, user=target, message=message),
        )
