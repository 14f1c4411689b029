"""Worker protocol calls on a short path through the middleware.

Pages need sessions, HEAD handling, the router and Starlette's exception
layer; a worker's POST to one of `WORKER_PATHS` needs none of them. At 10,000
workers these calls are nearly all the traffic, and issue 19's profiles put
the page stack's layers at about a tenth of the core: here they go from the
request id and observation layers (which every request passes) to one layer,
`WorkerGuards`, that makes every check the page stack's guards make (start
stamp, overload, shutdown, body limits, primary role), and to their route's
endpoint, found by exact path, which adds nosniff to the reply itself. Six
layers, each with its own call and its own wrapper of `send`, cost about 4%
of the core there.

Errors are answered as the full stack answers them: the app's exception
handlers by the exception's class, and anything unhandled propagates to
Starlette's outermost error middleware (JSON 500, logged). The routes come
from the one route table (`web/routes.py`); `scope["route"]` is set as the
router sets it, so logs and metrics name the route alike. [LOOP]
"""

import time
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from arbiter.protocol import WORKER_PATHS
from arbiter.web.middleware import (
    NOSNIFF,
    SHUTTING_DOWN,
    STATE_KEY,
    BodyLimits,
    content_length,
    primary_refusal,
    send_error,
    send_too_large,
    serve_counted,
)
from arbiter.web.overload import LoopLag, send_shed_reply

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


class WorkerEndpoints:
    """The innermost app of the short path: the route's endpoint, its errors
    answered by the app's handlers (`Exception` itself left to the outermost
    error middleware, as Starlette does)."""

    def __init__(self, routes: Mapping[str, Route], handlers: Mapping[Any, Handler]) -> None:
        self.routes = dict(routes)
        self.handlers = {kind: h for kind, h in handlers.items() if kind is not Exception}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes[scope["path"]]
        scope["route"] = route
        request = Request(scope, receive, send)
        try:
            response: Response = await route.endpoint(request)
        except Exception as error:
            handler = self._handler_for(error)
            if handler is None:
                raise
            response = await handler(request, error)
        if not any(name == NOSNIFF[0] for name, _ in response.raw_headers):
            response.raw_headers.append(NOSNIFF)
        await response(scope, receive, send)

    def _handler_for(self, error: Exception) -> Handler | None:
        for kind in type(error).__mro__:
            if kind in self.handlers:
                return self.handlers[kind]
        return None


class WorkerCallsMiddleware:
    """Sends each worker protocol call (POST to a worker path) down `short`, every
    other request down the rest of the stack (`app`)."""

    def __init__(self, app: ASGIApp, *, short: ASGIApp, paths: frozenset[str]) -> None:
        self.app = app
        self.short = short
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.paths:
            await self.short(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class WorkerGuards:
    """The page stack's guards for a worker call, as one layer and in the same
    order: the start stamp, then turned away while the loop lags, while the
    server shuts down, when the declared body is over its limit, when this
    instance may not take the call; a body of undeclared length is counted as
    it streams. Nosniff is added by `WorkerEndpoints`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        lag: LoopLag,
        is_shutting_down: Callable[[], bool],
        body_limits: BodyLimits,
        is_primary: bool,
        lease_held: Callable[[], bool] | None,
    ) -> None:
        self.app = app
        self.lag = lag
        self.is_shutting_down = is_shutting_down
        self.body_limits = body_limits
        self.is_primary = is_primary
        self.lease_held = lease_held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[STATE_KEY] = time.perf_counter()
        if self.lag.shedding():
            await send_shed_reply(scope, send)
            return
        if self.is_shutting_down():
            await send_error(scope, send, 503, SHUTTING_DOWN)
            return
        path = scope["path"]
        limit = self.body_limits.for_path(path)
        declared = content_length(scope)
        if declared is not None and declared > limit:
            await send_too_large(scope, send, limit)
            return
        refusal = primary_refusal(path, self.is_primary, self.lease_held)
        if refusal is not None:
            await send_error(scope, send, 503, refusal)
            return
        if declared is None:  # chunked: nothing bounds it but counting
            await serve_counted(self.app, scope, receive, send, limit)
        else:  # the server reads no more than the declared length
            await self.app(scope, receive, send)
