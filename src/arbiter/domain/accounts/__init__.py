"""Accounts: signup and approval (`users.py`), proving who you are
(`authentication.py`, over `passwords.py`: argon2 behind the `PasswordGuard`),
browser sessions (`sessions.py`) and worker tokens (`tokens.py`); what the
rest of the program sees of them is in `views.py`.

`Accounts` is the one service the web layer and the commands hold: it builds
the parts over one storage, clock and guard, and answers for them. Every
method takes plain values and runs in the threadpool (argon2 and the database
both block), but `proven_worker`, which reads memory only.
"""

import time
from collections.abc import Callable

from argon2 import PasswordHasher

from arbiter.domain.accounts.authentication import TOUCH_INTERVAL, Authentication
from arbiter.domain.accounts.passwords import Passwords
from arbiter.domain.accounts.sessions import Sessions
from arbiter.domain.accounts.tokens import Tokens
from arbiter.domain.accounts.users import Users
from arbiter.domain.accounts.views import ActiveSession, NewSession, TokenInfo, User
from arbiter.domain.credentials import WorkerProofs
from arbiter.domain.password_guard import PasswordGuard
from arbiter.storage import Storage

__all__ = ["TOUCH_INTERVAL", "Accounts", "ActiveSession", "NewSession", "TokenInfo", "User"]


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
        # Public: its gate is this process's bound on argon2 calls at once.
        self.guard = guard or PasswordGuard(clock=clock)
        passwords = Passwords(storage, hasher, self.guard, clock)
        proofs = worker_proofs or WorkerProofs.ephemeral()
        self.authentication = Authentication(storage, passwords, proofs, clock)
        self.users = Users(storage, passwords, self.authentication, clock)
        self.sessions = Sessions(
            storage,
            clock,
            session_seconds=session_hours * 3600.0,
            remember_seconds=remember_days * 86400.0,
        )
        self.tokens = Tokens(storage, passwords, self.authentication, clock)

    # --- accounts (users.py) ---

    def signup(
        self, username: str, password: str, email: str, tests_repo: str = "", *, address: str = ""
    ) -> User:
        """A pending account: it can log in once an approver accepts it."""
        return self.users.add(
            username, password, email, tests_repo, pending=True, approver=False, address=address
        )

    def create_user(
        self, username: str, password: str, *, email: str = "", approver: bool = False
    ) -> User:
        """An active account, for operators (`arbiter users create`)."""
        return self.users.add(username, password, email, "", pending=False, approver=approver)

    def accept(self, approver: str, username: str) -> None:
        self.users.accept(approver, username)

    def reject(self, approver: str, username: str) -> None:
        self.users.reject(approver, username)

    def set_blocked(self, approver: str, username: str, blocked: bool) -> None:
        self.users.set_blocked(approver, username, blocked)

    def get_user(self, username: str) -> User | None:
        return self.users.get(username)

    def list_users(self, *, pending: bool | None = None, blocked: bool | None = None) -> list[User]:
        return self.users.list(pending=pending, blocked=blocked)

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
        self.users.change_password(
            username,
            old_password,
            new_password,
            keep_session_id=keep_session_id,
            revoke_tokens=revoke_tokens,
            address=address,
        )

    def update_profile(self, username: str, *, email: str, tests_repo: str) -> None:
        self.users.update_profile(username, email=email, tests_repo=tests_repo)

    # --- proving who you are (authentication.py) ---

    def authenticate(self, username: str, password: str, *, address: str = "") -> User:
        return self.authentication.authenticate(username, password, address=address)

    def proven_worker(self, username: str, secret: str) -> User | None:
        return self.authentication.proven_worker(username, secret)

    def authenticate_worker(self, username: str, secret: str, address: str = "") -> User:
        return self.authentication.authenticate_worker(username, secret, address)

    def authenticate_token(self, token: str) -> User:
        return self.authentication.authenticate_token(token)

    # --- browser sessions (sessions.py) ---

    def start_session(self, user: User, *, remember: bool) -> NewSession:
        return self.sessions.start(user, remember=remember)

    def resolve_session(self, session_id: str) -> ActiveSession | None:
        return self.sessions.resolve(session_id)

    def end_session(self, session_id: str) -> None:
        self.sessions.end(session_id)

    def purge_expired_sessions(self) -> int:
        return self.sessions.purge_expired()

    def remove_stale_signups(self, days: int) -> list[str]:
        return self.users.remove_stale_signups(days)

    # --- worker tokens (tokens.py) ---

    def create_own_token(
        self, username: str, password: str, label: str = "", *, address: str = ""
    ) -> str:
        return self.tokens.create_own(username, password, label, address=address)

    def create_token(self, username: str, label: str = "") -> str:
        return self.tokens.create(username, label)

    def list_tokens(self, username: str) -> list[TokenInfo]:
        return self.tokens.list(username)

    def revoke_token(self, username: str, token_id: int) -> None:
        self.tokens.revoke(username, token_id)
