"""Worker protocol calls, each served start to end by one object.

Pages need sessions, HEAD handling, the router and Starlette's exception
layer; a worker's POST to one of `WORKER_PATHS` needs none of them. At 10,000
workers these calls are nearly all the traffic. `ArbiterApp` (web/app.py)
hands them to `WorkerCalls` before Starlette's middleware stack: one coroutine
that does what the layers they passed through did, in the same order, without
one coroutine and one wrapper of `send` per layer (the fleet benchmark's profiles put
those layers, and Starlette's body stream and response call, at about a tenth
of the core):

- the request id (web/request_id.py): the log context and `X-Request-ID`;
- the observers (web/observed.py): the access log and the request metrics,
  with the status sent (500 when nothing was) and the duration;
- every check of the page stack's guards (`WorkerGuards`): start stamp,
  overload, shutdown, body limits, primary role;
- the route's endpoint, found by exact path, with `scope["route"]` set as the
  router sets it; the body read and counted against its limit as the endpoint
  asks for it (`CountedBodyRequest`);
- errors answered by the app's exception handlers by the exception's class;
  anything unhandled answered as Starlette's outermost error middleware
  answers it (the app's handler for `Exception`: a JSON 500, logged), then
  raised to the server;
- the reply sent as two messages, with nosniff and the request id; a reply
  that sends itself another way (a stream, a file, background work) is left to
  send itself. [LOOP]
"""

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from arbiter.protocol import WORKER_PATHS
from arbiter.web.errors import ApiError
from arbiter.web.middleware import (
    NOSNIFF,
    SHUTTING_DOWN,
    STATE_KEY,
    BodyLimits,
    content_length,
    primary_refusal,
    send_error,
    send_too_large,
    too_large,
)
from arbiter.web.observed import RequestObserver
from arbiter.web.overload import LoopLag, send_shed_reply, sheds
from arbiter.web.request_id import HEADER, REQUEST_ID, request_id_of

Handler = Callable[[Request, Exception], Any]


def worker_routes(routes: list[BaseRoute]) -> dict[str, Route]:
    """The worker protocol's routes of the route table, by path (POST only)."""
    found = {
        route.path: route
        for route in routes
        if isinstance(route, Route) and route.path in WORKER_PATHS and route.methods == {"POST"}
    }
    missing = set(WORKER_PATHS) - found.keys()
    if missing:
        raise ValueError(f"worker paths without a POST route: {sorted(missing)}")
    return found


class WorkerGuards:
    """The page stack's guards for a worker call, in the same order: turned away
    while the loop lags, while the server shuts down, when the declared body is
    over its limit, when this instance may not take the call."""

    def __init__(
        self,
        *,
        lag: LoopLag,
        is_shutting_down: Callable[[], bool],
        body_limits: BodyLimits,
        is_primary: bool,
        lease_held: Callable[[], bool] | None,
    ) -> None:
        self.lag = lag
        self.is_shutting_down = is_shutting_down
        self.body_limits = body_limits
        self.is_primary = is_primary
        self.lease_held = lease_held

    async def turned_away(self, scope: Scope, send: Send) -> bool:
        """Answer the call here if a guard refuses it; whether one did."""
        path = scope["path"]
        if self.lag.shedding() and sheds(path):
            await send_shed_reply(scope, send)
            return True
        if self.is_shutting_down():
            await send_error(scope, send, 503, SHUTTING_DOWN)
            return True
        limit = self.body_limits.for_path(path)
        declared = content_length(scope)
        if declared is not None and declared > limit:
            await send_too_large(scope, send, limit)
            return True
        refusal = primary_refusal(path, self.is_primary, self.lease_held)
        if refusal is not None:
            await send_error(scope, send, 503, refusal)
            return True
        return False


class CountedBodyRequest(Request):
    """A worker call's request: its body, read when the endpoint first asks for
    it, straight from the server's messages and counted against `limit` (a
    declared length was checked by the guards; a chunked body is cut off once
    it passes the limit: 413). Starlette's own reading goes through a stream
    generator that a body of one message does not need."""

    def __init__(self, scope: Scope, receive: Receive, limit: int) -> None:
        super().__init__(scope, receive)
        self.body_limit = limit
        self.received: bytes | None = None

    async def body(self) -> bytes:
        if self.received is None:
            self.received = await self._receive_body()
        return self.received

    async def _receive_body(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect
            part = message.get("body", b"")
            size += len(part)
            if size > self.body_limit:
                raise ApiError(413, too_large(self.body_limit))
            parts.append(part)
            if not message.get("more_body", False):
                return b"".join(parts)  # one part: that very object, not a copy


class Reply:
    """One worker call's way out: the request id on every reply, and the status
    sent, for the observers."""

    __slots__ = ("id_header", "send", "status")

    def __init__(self, send: Send, request_id: str) -> None:
        self.send = send
        self.id_header = (HEADER, request_id.encode("ascii"))
        self.status = 0

    async def message(self, message: Message) -> None:
        """An ASGI `send`, for replies made elsewhere (refusals, streams)."""
        if message["type"] == "http.response.start":
            self.status = message["status"]
            message["headers"] = [*message.get("headers", ()), self.id_header]
        await self.send(message)

    async def response(self, response: Response, scope: Scope, receive: Receive) -> None:
        headers = response.raw_headers
        if not any(name == NOSNIFF[0] for name, _ in headers):
            headers.append(NOSNIFF)
        if response.background is not None or type(response).__call__ is not Response.__call__:
            await response(scope, receive, self.message)
            return
        headers.append(self.id_header)
        self.status = response.status_code
        start = {"type": "http.response.start", "status": self.status, "headers": headers}
        await self.send(start)
        await self.send({"type": "http.response.body", "body": response.body})


class WorkerCalls:
    """Every worker protocol call (a POST to a worker path), served here from
    start to end; see the module's docstring for what it does, in order."""

    def __init__(
        self,
        routes: Mapping[str, Route],
        handlers: Mapping[Any, Handler],
        guards: WorkerGuards,
        observers: Sequence[RequestObserver],
    ) -> None:
        self.routes = dict(routes)
        self.handlers = {kind: h for kind, h in handlers.items() if kind is not Exception}
        self.unhandled = handlers[Exception]
        self.guards = guards
        self.observers = tuple(observers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[STATE_KEY] = started = time.perf_counter()
        request_id = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        reply = Reply(send, request_id)
        try:
            await self._serve(scope, receive, reply)
        except Exception as error:
            if reply.status == 0:
                await self._answer_unhandled(scope, receive, reply, error)
            raise
        finally:
            seconds = time.perf_counter() - started
            for observe in self.observers:
                observe(scope, "POST", reply.status, seconds)
            REQUEST_ID.reset(token)

    async def _serve(self, scope: Scope, receive: Receive, reply: Reply) -> None:
        if await self.guards.turned_away(scope, reply.message):
            return
        path = scope["path"]
        route = self.routes[path]
        scope["route"] = route
        request = CountedBodyRequest(scope, receive, self.guards.body_limits.for_path(path))
        try:
            response: Response = await route.endpoint(request)
        except Exception as error:
            handler = self._handler_for(error)
            if handler is None:
                raise
            response = await handler(request, error)
        await reply.response(response, scope, receive)

    async def _answer_unhandled(
        self, scope: Scope, receive: Receive, reply: Reply, error: Exception
    ) -> None:
        """As Starlette's outermost error middleware: the handler's reply, if
        nothing was sent yet; the error is raised on to the server after it."""
        try:
            response = await self.unhandled(Request(scope, receive), error)
            await reply.response(response, scope, receive)
        finally:
            reply.status = reply.status or 500

    def _handler_for(self, error: Exception) -> Handler | None:
        for kind in type(error).__mro__:
            if kind in self.handlers:
                return self.handlers[kind]
        return None


def is_worker_call(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in WORKER_PATHS
