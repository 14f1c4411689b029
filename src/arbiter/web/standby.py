"""What a standby serves while it waits for the primary's lease (`arbiter
serve --role standby`, commands/serve.py): its health, and nothing else.

`/healthz` answers 200 (the process is up); `/readyz` 503, so a balancer that
routes by readiness sends nothing here; every other request a 503 that says
to retry shortly (JSON on /api/*, which workers back off on and retry, as they
do on a secondary). It touches no database: the lease is polled by the serve
command, which stops this app and starts the primary's once it holds it.
"""

import json

from starlette.types import Receive, Scope, Send

from arbiter.web.middleware import send_body, send_error

WAITING = "standby: this process serves once the primary is gone, retry shortly"
NO_STORE = [(b"cache-control", b"no-store")]


async def standby_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/healthz":
        await _json(send, 200, {"status": "alive", "role": "standby"})
    elif path == "/readyz":
        await _json(send, 503, {"status": "not ready", "role": "standby", "lease": False})
    else:
        await send_error(scope, send, 503, WAITING)


async def _json(send: Send, status: int, body: dict[str, object]) -> None:
    await send_body(send, status, b"application/json", json.dumps(body).encode(), NO_STORE)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
