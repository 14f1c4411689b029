"""Worker protocol calls on a short path through the middleware.

Pages need sessions, HEAD handling, the router and Starlette's exception
layer; a worker's POST to one of `WORKER_PATHS` needs none of them. At 10,000
workers these calls are nearly all the traffic, and issue 19's profiles put
the page stack's layers at about a tenth of the core: here they go from the
request id and observation layers (which every request passes) straight to
the guards they need (start stamp, shutdown, body limits, primary role,
nosniff) and to their route's endpoint, found by exact path.

Errors are answered as the full stack answers them: the app's exception
handlers by the exception's class, and anything unhandled propagates to
Starlette's outermost error middleware (JSON 500, logged). The routes come
from the one route table (`web/routes.py`); `scope["route"]` is set as the
router sets it, so logs and metrics name the route alike. [LOOP]
"""

from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from arbiter.protocol import WORKER_PATHS

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
