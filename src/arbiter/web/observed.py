"""One pure ASGI middleware that times every request and tells its observers.

The access log and the request metrics both want each request's method,
status and duration; one wrapper of `send` gives them all, so a request pays
for one timing and one extra coroutine layer, not one per consumer. Outermost
but for the request id, on the event loop. [LOOP]
"""

import time
from collections.abc import Callable, Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# (scope, method, status, seconds): status 0 when no reply was started; the
# method as the client sent it (HEAD, before it is served as GET).
RequestObserver = Callable[[Scope, str, int, float], None]


class ObservedRequestsMiddleware:
    def __init__(self, app: ASGIApp, observers: Sequence[RequestObserver]) -> None:
        self.app = app
        self.observers = tuple(observers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.observers:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = scope["method"]
        status = 0

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        except Exception:
            # Starlette's outermost error middleware answers it, outside this one.
            status = status or 500
            raise
        finally:
            seconds = time.perf_counter() - started
            for observe in self.observers:
                observe(scope, method, status, seconds)
