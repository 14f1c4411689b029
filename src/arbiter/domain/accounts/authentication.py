"""Proving who you are: a login's password, a worker's token or password (with
the proofs that spare argon2 for a password verified before), a scripting
token. Wrong name and wrong password are indistinguishable, in their message
and in their cost. Runs in the threadpool, but `proven_worker` (memory only).
"""

from collections.abc import Callable

from arbiter.domain.accounts.passwords import Passwords
from arbiter.domain.accounts.views import User
from arbiter.domain.credentials import ProvenWorkers, WorkerProofs, digest, is_worker_token
from arbiter.domain.errors import AccountBlocked, AccountPending, InvalidCredentials
from arbiter.storage import Storage
from arbiter.storage.records import TokenRecord, UserRecord

# Writes that only record "still alive" are rate-limited: a busy user or worker
# would otherwise turn every request into a write transaction.
TOUCH_INTERVAL = 600.0
# How long a worker's proven credentials are trusted without the database; a change
# made on another process (a secondary) takes effect on the primary within this.
PROVEN_WORKER_SECONDS = 60.0


def usable(record: UserRecord) -> User:
    if record.blocked:
        raise AccountBlocked
    if record.pending:
        raise AccountPending
    return User.from_record(record)


class Authentication:
    def __init__(
        self,
        storage: Storage,
        passwords: Passwords,
        worker_proofs: WorkerProofs,
        clock: Callable[[], float],
    ) -> None:
        self._storage = storage
        self._passwords = passwords
        self._proofs = worker_proofs
        self._clock = clock
        self._proven: ProvenWorkers[User] = ProvenWorkers(PROVEN_WORKER_SECONDS, clock)

    def forget_proven(self) -> None:
        """After a change to any account's standing or credentials: workers prove
        themselves to the database again."""
        self._proven.clear()

    def authenticate(self, username: str, password: str, *, address: str = "") -> User:
        """Login by password from a client `address`."""
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
        record = self._passwords.prove(record, username, password, address)
        self._passwords.rehash_if_needed(record, password)
        return usable(record)

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
        return usable(record)

    def _worker_by_token(self, username: str, token: str) -> User:
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
            found = tx.tokens.get_by_hash(digest(token))
        if record is None or found is None:
            raise InvalidCredentials
        if found.user_id != record.id or found.revoked_at is not None:
            raise InvalidCredentials
        self._touch_token(found)
        return usable(record)

    def _worker_by_password(self, username: str, password: str, address: str) -> User:
        with self._storage.read() as tx:
            record = tx.users.get_by_key(username)
        if record is not None and self._proof_matches(record, password):
            return usable(record)  # verified before, by this process or another
        record = self._passwords.prove(record, username, password, address)
        user = usable(record)  # a blocked or pending account keeps no proof
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

    def _touch_token(self, token: TokenRecord) -> None:
        now = self._clock()
        if token.last_used is None or now - token.last_used > TOUCH_INTERVAL:
            with self._storage.write() as tx:
                tx.tokens.touch(token.id, now)
