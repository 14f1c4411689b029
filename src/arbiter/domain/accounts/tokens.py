"""Worker tokens: made once and shown once (only their SHA-256 is kept), listed,
revoked. Runs in the threadpool."""

from arbiter.domain.accounts.part import AccountPart
from arbiter.domain.accounts.passwords import account
from arbiter.domain.accounts.views import TokenInfo
from arbiter.domain.credentials import digest, new_worker_token
from arbiter.domain.errors import NotFound
from arbiter.domain.profile_fields import check_token_label


class Tokens(AccountPart):
    def create_own(
        self, username: str, password: str, label: str = "", *, address: str = ""
    ) -> str:
        """A user's new worker token, made only with their current password: a
        stolen session alone cannot mint lasting credentials."""
        label = check_token_label(label)
        self._passwords.reprove(username, "current_password", password, address)
        return self.create(username, label)

    def create(self, username: str, label: str = "") -> str:
        """A new worker token, returned once: only its digest is kept. No password
        asked: for operators (`arbiter users token`); users go through
        `create_own`."""
        label = check_token_label(label)
        token = new_worker_token()
        with self._storage.write() as tx:
            record = account(tx, username)
            tx.tokens.add(
                user_id=record.id, label=label, token_hash=digest(token), created_at=self._clock()
            )
        return token

    def list(self, username: str) -> list[TokenInfo]:
        with self._storage.read() as tx:
            record = account(tx, username)
            return [TokenInfo.from_record(t) for t in tx.tokens.list_for_user(record.id)]

    def revoke(self, username: str, token_id: int) -> None:
        with self._storage.write() as tx:
            record = account(tx, username)
            if not tx.tokens.revoke(user_id=record.id, token_id=token_id, at=self._clock()):
                raise NotFound("No such token.")
        self._authentication.forget_proven()
