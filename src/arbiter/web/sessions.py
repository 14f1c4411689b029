"""Browser sessions: a signed cookie naming a server-side session.

The cookie holds only the random session id, signed with the app secret; the
session itself (user, CSRF token, expiry) lives in the database, so logout,
a password change or blocking ends every copy of the cookie on its next
request. Visitors without a session get a signed anonymous CSRF cookie so the
login and signup forms are protected too.

`SessionMiddleware.__call__` runs on the event loop; the one database lookup
per request (`resolve_session`) is offloaded to the threadpool.
"""

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote

from itsdangerous import BadSignature, Signer
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arbiter.domain.accounts import ActiveSession, NewSession, User
from arbiter.protocol import WORKER_PATHS

SESSION_COOKIE = "arbiter_session"
CSRF_COOKIE = "arbiter_csrf"
FLASH_COOKIE = "arbiter_flash"
SCOPE_KEY = "arbiter.session"


@dataclass
class RequestSession:
    """What a handler knows about the visitor, and the cookie changes to send."""

    active: ActiveSession | None = None
    session_id: str = ""  # the raw id from the cookie, when it names a live session
    anonymous_csrf: str = ""
    ended: bool = False  # the cookie named a session that no longer exists
    flashes: list[str] = field(default_factory=list)
    incoming_flashes: list[str] = field(default_factory=list)
    _started: NewSession | None = None
    _remember: bool = False
    _cleared: bool = False
    _anonymous_csrf_is_new: bool = False

    @property
    def user(self) -> User | None:
        return self.active.user if self.active else None

    @property
    def csrf_token(self) -> str:
        if self._started is not None:
            return self._started.csrf_token
        if self.active is not None:
            return self.active.csrf_token
        if not self.anonymous_csrf:
            self.anonymous_csrf = secrets.token_hex(32)
            self._anonymous_csrf_is_new = True
        return self.anonymous_csrf

    def csrf_matches(self, candidate: str) -> bool:
        return bool(candidate) and hmac.compare_digest(candidate, self.csrf_token)

    def begin(self, new_session: NewSession, *, remember: bool) -> None:
        self._started = new_session
        self._remember = remember
        self._cleared = False

    def clear(self) -> None:
        self.active = None
        self.session_id = ""
        self._started = None
        self._cleared = True

    def flash(self, message: str) -> None:
        self.flashes.append(message)

    def take_flashes(self) -> list[str]:
        taken, self.incoming_flashes = self.incoming_flashes, []
        return taken


def request_session(scope: Scope) -> RequestSession:
    session: RequestSession = scope[SCOPE_KEY]
    return session


class SessionMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        secret: Callable[[], str],
        resolve: Callable[[str], ActiveSession | None],
        secure: bool,
        remember_seconds: int,
    ) -> None:
        self.app = app
        self.secret = secret
        self._signer: Signer | None = None
        self.resolve = resolve
        self.secure = secure
        self.remember_seconds = remember_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in WORKER_PATHS:
            await self.app(scope, receive, send)
            return
        cookies = _parse_cookies(scope)
        session = RequestSession(
            anonymous_csrf=self._unsign(cookies.get(CSRF_COOKIE, "")),
            incoming_flashes=_split_flashes(self._unsign(cookies.get(FLASH_COOKIE, ""))),
        )
        session_id = self._unsign(cookies.get(SESSION_COOKIE, ""))
        if session_id:
            session.active = await run_in_threadpool(self.resolve, session_id)
            if session.active is None:
                session.ended = True
                session.clear()
            else:
                session.session_id = session_id
        scope[SCOPE_KEY] = session

        async def send_with_cookies(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *self._cookie_headers(session, cookies)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookies)

    @property
    def signer(self) -> Signer:
        # Built on first use: the secret is loaded from storage during start-up,
        # after the middleware stack is declared.
        if self._signer is None:
            self._signer = Signer(self.secret(), salt="arbiter.session")
        return self._signer

    def _unsign(self, value: str) -> str:
        if not value:
            return ""
        try:
            return self.signer.unsign(value).decode()
        except (BadSignature, UnicodeDecodeError):
            return ""

    def _cookie_headers(
        self, session: RequestSession, cookies: dict[str, str]
    ) -> list[tuple[bytes, bytes]]:
        headers: list[tuple[bytes, bytes]] = []
        started = session._started
        if started is not None:
            max_age = self.remember_seconds if session._remember else None
            headers.append(self._cookie(SESSION_COOKIE, self._sign(started.session_id), max_age))
        elif session._cleared and SESSION_COOKIE in cookies:
            headers.append(self._cookie(SESSION_COOKIE, "", 0))
        if session._anonymous_csrf_is_new:
            headers.append(self._cookie(CSRF_COOKIE, self._sign(session.anonymous_csrf), None))
        if session.flashes:
            headers.append(
                self._cookie(FLASH_COOKIE, self._sign("\x1f".join(session.flashes)), None)
            )
        elif FLASH_COOKIE in cookies and not session.incoming_flashes:
            headers.append(self._cookie(FLASH_COOKIE, "", 0))
        return headers

    def _sign(self, value: str) -> str:
        return self.signer.sign(value).decode()

    def _cookie(self, name: str, value: str, max_age: int | None) -> tuple[bytes, bytes]:
        parts = [f"{name}={quote(value, safe='')}", "Path=/", "HttpOnly", "SameSite=Lax"]
        if max_age is not None:
            parts.append(f"Max-Age={max_age}")
        if self.secure:
            parts.append("Secure")
        return (b"set-cookie", "; ".join(parts).encode("latin-1"))


def _parse_cookies(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # noqa: S112 - a malformed cookie header is ignored, not an error
                continue
    return {key: _unquote(morsel.value) for key, morsel in jar.items()}


def _unquote(value: str) -> str:
    from urllib.parse import unquote

    return unquote(value)


def _split_flashes(value: str) -> list[str]:
    return [item for item in value.split("\x1f") if item] if value else []


class EndedSessionRedirectMiddleware:
    """A visitor whose session was ended server-side (logout elsewhere, password
    change, account blocked) is sent to the login page with an explanation,
    instead of silently seeing pages as an anonymous visitor."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session: Any = scope.get(SCOPE_KEY)
        if (
            scope["type"] == "http"
            and isinstance(session, RequestSession)
            and session.ended
            and scope["method"] == "GET"
            and not scope["path"].startswith(("/api/", "/static/", "/login"))
        ):
            session.flash("Your session has ended. Please log in again.")
            location = "/login?next=" + quote(scope["path"], safe="/")
            await send(
                {
                    "type": "http.response.start",
                    "status": 302,
                    "headers": [(b"location", location.encode())],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)
