"""The baseline: a raw ASGI "hello" app served by Arbiter's own uvicorn setup.

It reads the request body and answers a canned JSON reply shaped like the
worker protocol's (a task for request_task, `task_alive` for task calls), so
the same simulated fleet runs against it under the same schedule. Every
figure of the fleet benchmark is also given as a ratio to this server's.

Run: .venv/bin/python bench/lib/hello_app.py --port P [--stock-httptools]

--stock-httptools serves it with uvicorn's own httptools protocol instead of
Arbiter's connection-limited one (bench/connections.py overhead compares them).
"""

import argparse
import time

import msgspec
import uvicorn
from starlette.types import Receive, Scope, Send

from arbiter.commands.serve import uvicorn_config

FAKE_RUN_ID = "0" * 24
_TASK = {
    "run": {
        "_id": FAKE_RUN_ID,
        "args": {"tc": "10+0.1", "threads": 1, "sprt": {"batch_size": 16}},
        "my_task": {"num_games": 960, "start": 0, "stats": {}},
    },
    "task_id": 0,
}
REPLIES: dict[str, dict[str, object]] = {
    "/api/request_version": {"version": 325},
    "/api/request_task": _TASK,
    "/api/update_task": {"task_alive": True},
    "/api/beat": {"task_alive": True},
}
_encode = msgspec.json.Encoder().encode


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    started = time.perf_counter()
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    payload = REPLIES.get(scope["path"], {})
    body = _encode({**payload, "duration": round(time.perf_counter() - started, 6)})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stock-httptools", action="store_true")
    args = parser.parse_args()
    config = uvicorn_config(app, "127.0.0.1", args.port, "warning")
    if args.stock_httptools:
        config.http = "httptools"
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
