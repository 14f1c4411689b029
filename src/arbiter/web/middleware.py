"""Pure ASGI middleware (never BaseHTTPMiddleware: it buffers bodies and breaks
streaming). Every `__call__` here runs on the event loop and does only small,
non-blocking work; the session lookup is the one database call, and it is
offloaded to the threadpool.

Order, outermost first (see `create_app`): HEAD->GET, request state, shutdown
guard, body size limit, reject worker API on a secondary, session.
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arbiter.protocol import API_PREFIX, TEMPORARY_STATUSES, WORKER_PATHS
from arbiter.web.replies import DEFAULT_RETRY_AFTER, api_error_body, plain_error_body

STATE_KEY = "arbiter.started_at"
HEAD_KEY = "arbiter.head"  # set on a HEAD request that is being served as GET
# The request's database work (storage/request_bounds.py), abandoned by the
# server's protocol when the client goes away (web/connection_limits.py).
QUERIES_KEY = "arbiter.queries"
NOSNIFF = (b"x-content-type-options", b"nosniff")


def request_started_at(scope: Scope) -> float:
    started: float = scope.get(STATE_KEY, time.perf_counter())
    return started


def is_head_request(scope: Scope) -> bool:
    """A HEAD served as GET: the handler's reply is only looked at, nothing is fetched."""
    return HEAD_KEY in scope


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIX) or path == API_PREFIX.rstrip("/")


async def send_body(
    send: Send,
    status: int,
    content_type: bytes,
    body: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    length = str(len(body)).encode()
    headers = [(b"content-type", content_type), (b"content-length", length), NOSNIFF]
    headers.extend(extra or ())
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(
    scope: Scope, send: Send, status: int, message: str, retry_after: int = DEFAULT_RETRY_AFTER
) -> None:
    """JSON on /api/* (`{error, duration}`, or a worker call's temporary
    refusal: web/replies.py), a short plain page elsewhere; a 429 or 503 says
    when to retry."""
    path = scope.get("path", "")
    extra = [(b"retry-after", str(retry_after).encode())] if status in TEMPORARY_STATUSES else []
    if is_api_path(path):
        body = api_error_body(path, status, message, request_started_at(scope))
        await send_body(send, status, b"application/json", body, extra)
        return
    page = plain_error_body(status, message)
    await send_body(send, status, b"text/html; charset=utf-8", page, extra)


class HeadMethodMiddleware:
    """Serve HEAD as GET without a body (RFC 9110 9.3.2), so every GET route answers HEAD."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        body_sent = False

        async def send_without_body(message: Message) -> None:
            nonlocal body_sent
            if message["type"] == "http.response.body":
                if body_sent:
                    return
                body_sent = True
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        scope["method"] = "GET"
        scope[HEAD_KEY] = True  # so a download is not counted, and the access log says HEAD
        await self.app(scope, receive, send_without_body)


class RequestStateMiddleware:
    """Stamps the start time every `duration` is measured from."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[STATE_KEY] = time.perf_counter()
        await self.app(scope, receive, send)


SHUTTING_DOWN = "server is shutting down, retry shortly"


class ShutdownGuardMiddleware:
    """Refuses new requests with 503 once shutdown has begun, so draining ends."""

    def __init__(self, app: ASGIApp, is_shutting_down: Callable[[], bool]) -> None:
        self.app = app
        self.is_shutting_down = is_shutting_down

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.is_shutting_down():
            await send_error(scope, send, 503, SHUTTING_DOWN)
            return
        await self.app(scope, receive, send)


class BodyTooLargeError(Exception):
    pass


@dataclass(frozen=True)
class BodyLimits:
    """The largest body each path takes: `limit`, `upload_limit` under the upload
    paths, or a path's own entry in `path_limits`."""

    limit: int
    upload_limit: int
    upload_paths: tuple[str, ...]
    path_limits: Mapping[str, int] = field(default_factory=dict)

    def for_path(self, path: str) -> int:
        if path in self.path_limits:
            return self.path_limits[path]
        return self.upload_limit if path.startswith(self.upload_paths) else self.limit


class BodySizeLimitMiddleware:
    """Answers 413 before reading a body larger than the limit.

    A declared Content-Length over the limit is refused at once; a chunked body
    is counted as it streams and cut off as soon as it passes the limit, so no
    handler ever buffers more than `limit` bytes.
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        upload_limit: int,
        upload_paths: tuple[str, ...],
        path_limits: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.limits = BodyLimits(limit, upload_limit, upload_paths, dict(path_limits or {}))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.for_path(scope["path"])
        declared = content_length(scope)
        if declared is not None and declared > limit:
            await send_too_large(scope, send, limit)
            return
        await serve_counted(self.app, scope, receive, send, limit)


def too_large(limit: int) -> str:
    """What a 413 says: the body's limit."""
    return f"request body larger than {limit} bytes"


async def send_too_large(scope: Scope, send: Send, limit: int) -> None:
    await send_error(scope, send, 413, too_large(limit))


async def serve_counted(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, limit: int
) -> None:
    """Serve with the body counted as it streams: 413 once it passes `limit`
    (unless the reply has started)."""
    received = 0
    response_started = False

    async def counting_receive() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLargeError
        return message

    async def tracking_send(message: Message) -> None:
        nonlocal response_started
        if message["type"] == "http.response.start":
            response_started = True
        await send(message)

    try:
        await app(scope, counting_receive, tracking_send)
    except BodyTooLargeError:
        if not response_started:
            await send_too_large(scope, send, limit)


def content_length(scope: Scope) -> int | None:
    """The declared Content-Length, or None (absent, or not a number)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


# Stateless worker calls a secondary may take: the upload checks the task's
# owner in the database and stores the file, which spreads the heaviest
# worker request (the reference gives it its own processes) off the primary.
SECONDARY_WORKER_PATHS = frozenset({"/api/upload_pgn"})


class RejectNonPrimaryWorkerApiMiddleware:
    """On a secondary, worker endpoints answer JSON 503 so workers back off and retry;
    so do they on a primary while `lease_held()` says it lost its lease (web/lease.py)."""

    def __init__(
        self, app: ASGIApp, is_primary: bool, lease_held: Callable[[], bool] | None = None
    ) -> None:
        self.app = app
        self.is_primary = is_primary
        self.lease_held = lease_held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = None
        if scope["type"] == "http":
            refusal = primary_refusal(scope["path"], self.is_primary, self.lease_held)
        if refusal is not None:
            await send_error(scope, send, 503, refusal)
            return
        await self.app(scope, receive, send)


def primary_refusal(
    path: str, is_primary: bool, lease_held: Callable[[], bool] | None
) -> str | None:
    """Why a worker call to `path` is refused here (503), or None: a secondary
    takes only the stateless ones, a primary none while it has lost its lease."""
    if path not in WORKER_PATHS or path in SECONDARY_WORKER_PATHS:
        return None
    if not is_primary:
        return "primary instance required"
    if lease_held is not None and not lease_held():
        return "primary lease lost, retry shortly"
    return None


# Content-Security-Policy without inline script: every script and style is a
# file served by the app itself.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    NOSNIFF,
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


# API replies and file downloads: a browser must not guess a type from the bytes.
_API_HEADERS = [NOSNIFF]


class SecurityHeadersMiddleware:
    """Adds CSP, nosniff, Referrer-Policy and frame denial to every UI response,
    nosniff to every /api/* one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = _API_HEADERS if is_api_path(scope["path"]) else _SECURITY_HEADERS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [header for header in added if header[0] not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
