"""Driving one pure ASGI app with raw messages, and checking the replies it sends
(a test client would hide a HEAD's body parts or a second response start)."""

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arbiter.protocol import TEMPORARY_STATUSES
from arbiter.web.replies import DEFAULT_RETRY_AFTER, plain_error_body
from tests import fresh_loop

Sent = list[Message]


def stream_app(seen: list[Scope]) -> ASGIApp:
    """An inner app that records its scope and answers in two body parts."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(dict(scope))
        start = {"type": "http.response.start", "status": 200, "headers": [(b"x-inner", b"1")]}
        await send(start)
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await send({"type": "http.response.body", "body": b"two", "more_body": False})

    return app


async def read_all(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        chunk: bytes = message.get("body", b"")
        body += chunk
        if not message.get("more_body"):
            return body


async def echo_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body, then answers its length."""
    body = await read_all(receive)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(len(body)).encode()})


async def early_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Starts its reply before it reads the body."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await read_all(receive)
    await send({"type": "http.response.body", "body": b"late"})


def call(
    app: ASGIApp,
    path: str = "/page",
    *,
    method: str = "GET",
    kind: str = "http",
    headers: tuple[tuple[bytes, bytes], ...] = (),
    chunks: tuple[bytes, ...] = (b"",),
) -> Sent:
    """The messages `app` sends for one request whose body arrives in `chunks`."""
    scope: Scope = {"type": kind, "method": method, "path": path, "headers": list(headers)}
    parts: list[Message] = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: Sent = []

    async def receive() -> Message:
        return parts.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    async def run() -> None:
        await app(scope, receive, send)

    fresh_loop.run(run())
    return sent


def error_reply(sent: Sent) -> tuple[int, dict[bytes, bytes], bytes]:
    """(status, headers, body) of a reply sent as one start and one body."""
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]


def error_body(sent: Sent, status: int, content_type: bytes) -> bytes:
    """The body of an error reply of `status`, checked to carry exactly its
    type, its length and nosniff."""
    got, headers, body = error_reply(sent)
    assert got == status
    expected = {
        b"content-type": content_type,
        b"content-length": str(len(body)).encode(),
        b"x-content-type-options": b"nosniff",
    }
    if status in TEMPORARY_STATUSES:
        expected[b"retry-after"] = str(DEFAULT_RETRY_AFTER).encode()
    assert headers == expected
    return body


def assert_json_error(sent: Sent, status: int, error: str) -> None:
    reply = json.loads(error_body(sent, status, b"application/json"))
    assert reply["error"] == error
    assert 0 <= reply["duration"] < 5


def assert_temporary_refusal(sent: Sent, status: int, message: str) -> None:
    """A worker call refused for now: a JSON string (no object with `error`,
    which the official worker takes as final) and Retry-After."""
    assert json.loads(error_body(sent, status, b"application/json")) == message


def assert_page_error(sent: Sent, status: int, message: str) -> None:
    body = error_body(sent, status, b"text/html; charset=utf-8")
    assert body == plain_error_body(status, message)
