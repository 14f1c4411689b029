"""Every request's id: in its reply (`X-Request-ID`) and in every log line
written while it is served, in the threadpool too (anyio copies the context
into the thread), so an access line and the errors behind it can be matched.

The proxy's id is kept when it sends one (nginx: `proxy_set_header
X-Request-ID $request_id`), so its log and ours share it; it must look like an
id (letters, digits, `.`, `_`, `-`, at most 64), else a new one is made.
Pure ASGI, outermost, on the event loop.
"""

import contextvars
import itertools
import os
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("arbiter_request_id", default="-")
_ACCEPTABLE = re.compile(rb"[A-Za-z0-9._-]{1,64}")
# An id names a request in the logs; it is no secret. A process's own random
# prefix and a counter make ids unique across processes and restarts at the cost
# of a counter step: os.urandom on every request took 5% of the core under load.
_PREFIX = os.urandom(4).hex()
_serial = itertools.count(1)


def current_request_id() -> str:
    """The id of the request being served here, "-" outside any request."""
    return REQUEST_ID.get()


def request_id_of(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == HEADER and _ACCEPTABLE.fullmatch(value):
            return bytes(value).decode("ascii")
    return f"{_PREFIX}-{next(_serial):x}"


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        encoded = request_id.encode("ascii")

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (HEADER, encoded)]
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
