"""A reply's head waits for its body (web/one_write.py), on a real uvicorn server
with Arbiter's protocol, read over a raw connection. Each app pauses between
the head and what follows it: a head sent on its own would arrive in the pause."""

import asyncio
from typing import Any

import pytest

from arbiter.web.one_write import holds_head
from tests import fresh_loop
from tests.web.live_server import serving

PAUSE = 0.3  # s between the head and what follows it
QUIET = 0.1  # s a read waits to be sure nothing more has come


async def paused_reply(scope: Any, receive: Any, send: Any) -> None:
    """Head, a pause, then "ok"; for `/fail` the pause ends in an error instead;
    for `/stream`, two parts with a pause between them too."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    path = scope["path"]
    length = [] if path == "/stream" else [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": length})
    await asyncio.sleep(PAUSE)
    if path == "/fail":
        raise RuntimeError("failed after its head")
    if path == "/stream":
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await asyncio.sleep(PAUSE)
        await send({"type": "http.response.body", "body": b"two"})
        return
    await send({"type": "http.response.body", "body": b"ok"})


async def first_read(reader: asyncio.StreamReader) -> bytes:
    """What one read brings, and whatever follows within QUIET (the same write
    can take two reads)."""
    data = await asyncio.wait_for(reader.read(65536), timeout=10)
    try:
        while more := await asyncio.wait_for(reader.read(65536), timeout=QUIET):
            data += more
    except TimeoutError:
        pass
    return data


def exchange(request: bytes, reads: int = 1) -> list[bytes]:
    """Send `request` to `paused_reply` and return `reads` successive arrivals."""

    async def scenario() -> list[bytes]:
        async with serving(paused_reply) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await writer.drain()
            arrivals = [await first_read(reader) for _ in range(reads)]
            writer.close()
            return arrivals

    return fresh_loop.run(scenario())


def test_the_head_arrives_with_the_body() -> None:
    (arrival,) = exchange(b"GET /reply HTTP/1.1\r\nhost: a\r\n\r\n")
    assert arrival.startswith(b"HTTP/1.1 200 OK\r\n")
    assert arrival.endswith(b"\r\n\r\nok")


def test_a_post_with_a_body_is_answered_in_one_write() -> None:
    (arrival,) = exchange(b"POST /reply HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\r\nabc")
    assert arrival.startswith(b"HTTP/1.1 200 OK\r\n")
    assert arrival.endswith(b"ok")


def test_only_the_head_waits_the_later_parts_go_at_once() -> None:
    first, second = exchange(b"GET /stream HTTP/1.1\r\nhost: a\r\n\r\n", reads=2)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    assert first.endswith(b"\r\n\r\n3\r\none\r\n")
    assert second == b"3\r\ntwo\r\n0\r\n\r\n"


def test_a_head_request_gets_its_head_without_a_body_write() -> None:
    (arrival,) = exchange(b"HEAD /reply HTTP/1.1\r\nhost: a\r\n\r\n")
    assert arrival.startswith(b"HTTP/1.1 200 OK\r\n")
    assert arrival.endswith(b"\r\n\r\n")


def test_an_app_that_fails_after_its_head_still_sends_the_head_then_closes() -> None:
    (arrival,) = exchange(b"GET /fail HTTP/1.1\r\nhost: a\r\n\r\n")
    assert arrival.startswith(b"HTTP/1.1 200 OK\r\n")
    assert arrival.endswith(b"\r\n\r\n")


def test_an_expected_continue_comes_before_the_head() -> None:
    request = (
        b"POST /reply HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 3\r\n\r\n"
    )

    async def scenario() -> tuple[bytes, bytes]:
        async with serving(paused_reply) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await writer.drain()
            interim = await first_read(reader)
            writer.write(b"abc")
            await writer.drain()
            reply = await first_read(reader) + await first_read(reader)
            writer.close()
            return interim, reply

    interim, reply = fresh_loop.run(scenario())
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
    assert reply.endswith(b"ok")


def test_keep_alive_requests_each_get_their_whole_reply() -> None:
    request = b"GET /reply HTTP/1.1\r\nhost: a\r\n\r\n"

    async def scenario() -> list[bytes]:
        async with serving(paused_reply) as (_, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            arrivals = []
            for _ in range(3):
                writer.write(request)
                await writer.drain()
                arrivals.append(await first_read(reader))
            writer.close()
            return arrivals

    for arrival in fresh_loop.run(scenario()):
        assert arrival.startswith(b"HTTP/1.1 200 OK\r\n")
        assert arrival.endswith(b"ok")


@pytest.mark.parametrize(
    ("method", "expects_continue", "held"),
    [("GET", False, True), ("POST", False, True), ("HEAD", False, False), ("POST", True, False)],
)
def test_which_requests_hold_their_head(method: str, expects_continue: bool, held: bool) -> None:
    assert holds_head(method, expects_continue) is held
