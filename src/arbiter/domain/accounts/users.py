"""Accounts themselves: signup and creation, an approver's accept, reject and
block, reading them, and a user's own password and profile. A state change and
its audit action commit in one transaction. Runs in the threadpool."""

from arbiter.domain import actions
from arbiter.domain.accounts.part import AccountPart
from arbiter.domain.accounts.passwords import account, approver, audit
from arbiter.domain.accounts.views import User
from arbiter.domain.actions import SYSTEM_USER
from arbiter.domain.credentials import check_password_strength, digest
from arbiter.domain.errors import PermissionDenied, ValidationError
from arbiter.domain.profile_fields import check_email, check_tests_repo, check_username
from arbiter.storage import DuplicateKey
from arbiter.storage.base import NewAction, NewUser


class Users(AccountPart):
    def add(
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
        """A new account, pending an approver's accept or active at once.
        Signups from a client `address` are counted (TooManyAttempts beyond the
        hourly limit; no address, no count)."""
        check_username(username)
        email = check_email(email) if email or pending else ""
        tests_repo = check_tests_repo(tests_repo)
        check_password_strength("password", password, [username, email])
        if address:
            self._passwords.guard.take_signup(address)
        new_user = NewUser(
            username=username,
            email=email,
            password_hash=self._passwords.hash(password),
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

    def accept(self, approver_name: str, username: str) -> None:
        with self._storage.write() as tx:
            by = approver(tx, approver_name)
            user = account(tx, username)
            tx.users.set_pending(user.id, False)
            audit(tx, "accept_user", by, user.username, message="accepted", now=self._clock())

    def reject(self, approver_name: str, username: str) -> None:
        """Deletes a pending account; active accounts are blocked instead, never deleted."""
        with self._storage.write() as tx:
            by = approver(tx, approver_name)
            user = account(tx, username)
            if not user.pending:
                raise PermissionDenied(
                    f"{user.username} is not pending; block the account instead."
                )
            tx.users.delete(user.id)
            audit(tx, "reject_user", by, user.username, message="rejected", now=self._clock())
        self._authentication.forget_proven()

    def remove_stale_signups(self, days: int, batch: int = 100) -> list[str]:
        """Delete the signups no approver accepted within `days` (0: keep them),
        each with a `reject_user` action by the system; returns their names.
        Accepted accounts are never removed. [job executor]"""
        if days <= 0:
            return []
        now = self._clock()
        with self._storage.write() as tx:
            stale = tx.users.pending_since_before(now - days * 86400.0, batch)
            for user in stale:
                tx.users.delete(user.id)
                entry = NewAction(
                    time=now,
                    action="reject_user",
                    username=SYSTEM_USER,
                    user=user.username,
                    message=f"signup not accepted within {days} days",
                )
                actions.record(tx, entry)
        if stale:
            self._authentication.forget_proven()
        return [user.username for user in stale]

    def set_blocked(self, approver_name: str, username: str, blocked: bool) -> None:
        """Blocking also ends every session and invalidates cached worker secrets."""
        with self._storage.write() as tx:
            by = approver(tx, approver_name)
            user = account(tx, username)
            if user.id == by.id:
                raise PermissionDenied("You cannot block yourself.")
            tx.users.set_blocked(user.id, blocked)
            if blocked:
                tx.sessions.delete_for_user(user.id)
            verb = "blocked" if blocked else "unblocked"
            audit(tx, "block_user", by, user.username, message=verb, now=self._clock())
        self._authentication.forget_proven()

    def get(self, username: str) -> User | None:
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
        return None if record is None else User.from_record(record)

    def list(self, *, pending: bool | None = None, blocked: bool | None = None) -> list[User]:
        with self._storage.read() as tx:
            return [User.from_record(r) for r in tx.users.list(pending=pending, blocked=blocked)]

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
        record = self._passwords.reprove(username, "old_password", old_password, address)
        check_password_strength("new_password", new_password, [record.username, record.email])
        new_hash = self._passwords.hash(new_password)
        with self._storage.write() as tx:
            tx.users.set_password_hash(record.id, new_hash, new_secret=True)
            keep = digest(keep_session_id) if keep_session_id else None
            tx.sessions.delete_for_user(record.id, keep_id_hash=keep)
            if revoke_tokens:
                tx.tokens.revoke_all(user_id=record.id, at=self._clock())
        self._authentication.forget_proven()

    def update_profile(self, username: str, *, email: str, tests_repo: str) -> None:
        email, tests_repo = check_email(email), check_tests_repo(tests_repo)
        with self._storage.write() as tx:
            record = account(tx, username)
            tx.users.update_profile(record.id, email=email, tests_repo=tests_repo)
