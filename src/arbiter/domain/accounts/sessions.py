"""Browser sessions: a signed cookie names a server-side session, kept as the
SHA-256 of its id, so logout, a password change or a block ends it at once.
Runs in the threadpool."""

import secrets
from collections.abc import Callable

from arbiter.domain.accounts.authentication import TOUCH_INTERVAL
from arbiter.domain.accounts.views import ActiveSession, NewSession, User
from arbiter.domain.credentials import digest
from arbiter.storage import Storage
from arbiter.storage.records import SessionRecord


class Sessions:
    def __init__(
        self,
        storage: Storage,
        clock: Callable[[], float],
        *,
        session_seconds: float,
        remember_seconds: float,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._session_seconds = session_seconds
        self._remember_seconds = remember_seconds

    def start(self, user: User, *, remember: bool) -> NewSession:
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

    def resolve(self, session_id: str) -> ActiveSession | None:
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

    def end(self, session_id: str) -> None:
        with self._storage.write() as tx:
            tx.sessions.delete(digest(session_id))

    def purge_expired(self) -> int:
        with self._storage.write() as tx:
            return tx.sessions.delete_expired(self._clock())
