"""Connection limits (web/connection_limits.py) on a real `arbiter serve` process,
driven over raw sockets: oversized or endless headers, too many headers,
trickled heads and bodies, the cap on open connections, and the abandoned
request's queries. The limits act before any storage is touched, so SQLite
alone is used."""

import asyncio
import contextlib
import contextvars
import json
import select
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from arbiter.commands.serve import connection_limits, uvicorn_config
from arbiter.runtime.settings import Settings, SettingsError
from arbiter.storage import QueryAbandoned, Storage
from arbiter.storage.engine import make_engine, sqlite_url
from arbiter.storage.request_bounds import RequestQueries
from arbiter.web.app import ArbiterApp
from arbiter.web.connection_limits import (
    FD_RESERVE,
    AddressShares,
    ConnectionLimits,
    LimitedHttpToolsProtocol,
    reply_bytes,
    shown_path,
)
from arbiter.web.middleware import QUERIES_KEY
from tests import fresh_loop
from tests.web.live_server import Server, free_port, start_server, stop

SMALL_LIMITS = {
    "ARBITER_MAX_HEADER_BYTES": "4096",
    "ARBITER_MAX_HEADERS": "20",
    "ARBITER_HEADER_TIMEOUT_SECONDS": "1",
    "ARBITER_BODY_TIMEOUT_SECONDS": "1",
    "ARBITER_BODY_MIN_BYTES_PER_SECOND": "1000",
}
# Seconds a test waits before calling a reply hung: far above any honest delay,
# even on a loaded machine. How fast replies come is measured by the benchmarks.
HANG_GUARD = 30.0

GET = b"GET /api/active_runs HTTP/1.1\r\nhost: arbiter\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("limits") / "data", extra_env=SMALL_LIMITS)
    yield running
    stop(running)


def connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    """A connection from `source`, an address of the loopback network (all of
    127.0.0.0/8 is this machine's), so one machine can be several clients."""
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def read_until_closed(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset ends it too)."""
    data = b""
    try:
        while chunk := connection.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def read_reply(connection: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One reply, read byte by byte up to its head's end so that a pipelined
    reply after it stays in the socket for the next call."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = connection.recv(1)
        assert byte, f"closed before a reply: {head!r}"
        head += byte
    lines = head.decode("latin-1").strip().split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    while len(body) < int(headers.get("content-length", "0")):
        body += connection.recv(int(headers["content-length"]) - len(body))
    return int(lines[0].split(" ")[1]), headers, body


def parse(raw: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, json.loads(body)


# ------------------------------------------------------------ pure parts


def test_a_refusal_is_a_whole_json_reply_that_closes() -> None:
    status, headers, body = parse(
        reply_bytes(503, "Service Unavailable", "/x", "busy", duration=0.25, retry_after=10)
    )
    assert status == 503
    assert headers["content-type"] == "application/json"
    assert headers["retry-after"] == "10"
    assert headers["connection"] == "close"
    assert body == {"error": "/x: busy", "duration": 0.25}


def test_the_shown_path_drops_the_query_and_is_bounded() -> None:
    assert shown_path(b"/api/beat?x=1") == "/api/beat"
    assert shown_path(b"*") == "/"
    assert len(shown_path(b"/" + b"a" * 10_000)) == 200


def test_the_cap_never_exceeds_the_descriptor_limit() -> None:
    automatic = ConnectionLimits().effective_max_connections()
    assert automatic > 0
    assert ConnectionLimits(max_connections=10).effective_max_connections() == 10
    huge = ConnectionLimits(max_connections=10**9).effective_max_connections()
    assert huge == automatic
    assert automatic + FD_RESERVE >= huge


def test_each_limit_is_a_setting() -> None:
    settings = Settings.from_env(SMALL_LIMITS)
    assert connection_limits(settings) == ConnectionLimits(
        max_header_bytes=4096,
        max_headers=20,
        header_timeout=1,
        body_timeout=1,
        body_min_rate=1000,
        max_connections=0,
        max_connections_per_address=0,
    )
    assert connection_limits(Settings()) == ConnectionLimits()


def test_an_address_share_is_a_twentieth_of_the_cap_at_least_100() -> None:
    assert ConnectionLimits(max_connections=10_000).effective_per_address() == 500
    assert ConnectionLimits(max_connections=1_000).effective_per_address() == 100
    assert ConnectionLimits(max_connections=50).effective_per_address() == 50
    assert (
        ConnectionLimits(max_connections=50, max_connections_per_address=7).effective_per_address()
        == 7
    )


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        (("192.0.2.7", 5000), "192.0.2.7"),
        (("2001:db8:1:2:3:4:5:6", 5000, 0, 0), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:ffff::1", 5000, 0, 0), "2001:db8:1:2::/64"),  # the same /64
        (("::ffff:192.0.2.7", 5000, 0, 0), "192.0.2.7"),
        (("10.0.0.2", 5000), None),  # the proxy
        (("10.1.2.3", 5000), None),  # in the proxies' network
        ("/run/arbiter.sock", None),  # a Unix socket
    ],
)
def test_what_counts_as_one_address(peer: object, key: str | None) -> None:
    shares = AddressShares("10.0.0.2, 10.1.0.0/16")
    assert shares.key(peer) == key


def test_a_wildcard_proxy_list_exempts_no_address() -> None:
    assert AddressShares("*").key(("127.0.0.1", 1)) == "127.0.0.1"


@pytest.mark.parametrize(
    "name", [*SMALL_LIMITS, "ARBITER_MAX_CONNECTIONS", "ARBITER_MAX_CONNECTIONS_PER_ADDRESS"]
)
def test_a_limit_out_of_range_is_refused(name: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: "-1"})


# ------------------------------------------------------------ headers


def test_a_header_over_the_size_limit_gets_431(server: Server) -> None:
    with connect(server) as connection:
        connection.sendall(GET + b"x-big: " + b"a" * 5000 + b"\r\n\r\n")
        status, headers, body = parse(read_until_closed(connection))
    assert status == 431
    assert headers["content-type"] == "application/json"
    assert body["error"] == (
        "/api/active_runs: request headers too large (the limit is 4096 bytes in at most 20)"
    )
    assert isinstance(body["duration"], float)


def test_a_header_that_never_ends_gets_431_and_is_closed(server: Server) -> None:
    with connect(server) as connection:
        connection.sendall(GET + b"x-endless: ")
        sent = 0
        while sent < 10_000_000 and not select.select([connection], [], [], 0.001)[0]:
            connection.sendall(b"a" * 1000)
            sent += 1000
        status, _, body = parse(read_until_closed(connection))
    # answered once the limit was passed, give or take one read of the server's
    assert sent < 300_000
    assert status == 431
    assert str(body["error"]).startswith("/api/active_runs: request headers too large")


def test_too_many_headers_get_431(server: Server) -> None:
    many = b"".join(b"x-h%d: 1\r\n" % index for index in range(25))
    with connect(server) as connection:
        connection.sendall(GET + many + b"\r\n")
        status, _, body = parse(read_until_closed(connection))
    assert status == 431
    assert str(body["error"]).startswith("/api/active_runs: request headers too large")


def test_headers_at_the_limits_are_served(server: Server) -> None:
    some = b"".join(b"x-h%d: %s\r\n" % (index, b"a" * 100) for index in range(18))
    with connect(server) as connection:
        connection.sendall(GET + some + b"\r\n")
        status, _, _ = read_reply(connection)
    assert status == 200


# ------------------------------------------------------------ slow clients


def test_headers_sent_slowly_past_the_timeout_are_closed(server: Server) -> None:
    with connect(server) as connection:
        connection.sendall(GET)
        started = time.monotonic()
        try:
            for line in range(20):
                time.sleep(0.25)
                connection.sendall(b"x-slow-%d: 1\r\n" % line)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert read_until_closed(connection) == b""
        elapsed = time.monotonic() - started
    assert elapsed > 0.9  # not before the timeout; the bound above it is a hang guard
    assert elapsed < HANG_GUARD


def test_a_body_that_stops_midway_is_closed(server: Server) -> None:
    head = b"POST /api/request_version HTTP/1.1\r\nhost: arbiter\r\ncontent-length: 1000\r\n\r\n"
    with connect(server) as connection:
        started = time.monotonic()
        connection.sendall(head + b'{"password": ')
        reply = read_until_closed(connection)
        elapsed = time.monotonic() - started
    assert reply == b""
    assert 0.9 < elapsed < HANG_GUARD


def test_a_body_arriving_at_the_minimum_rate_is_not_cut(server: Server) -> None:
    body = b"x" * 3000  # at 2,000 bytes/s over 1.5 s: twice the minimum rate
    head = b"POST /api/request_version HTTP/1.1\r\nhost: arbiter\r\ncontent-length: 3000\r\n\r\n"
    with connect(server) as connection:
        connection.sendall(head)
        for offset in range(0, len(body), 500):
            time.sleep(0.25)
            connection.sendall(body[offset : offset + 500])
        status, headers, _ = read_reply(connection)
    assert status == 400  # not JSON: answered by the app, not cut
    assert headers["content-type"] == "application/json"


def test_an_idle_keep_alive_connection_outlives_the_header_timeout(server: Server) -> None:
    with connect(server) as connection:
        for _ in range(3):
            connection.sendall(GET + b"\r\n")
            status, headers, _ = read_reply(connection)
            assert status == 200
            assert headers.get("connection") != "close"
            time.sleep(1.5)


def test_pipelined_requests_are_all_served(server: Server) -> None:
    with connect(server) as connection:
        connection.sendall((GET + b"\r\n") * 3)
        assert [read_reply(connection)[0] for _ in range(3)] == [200, 200, 200]


# ------------------------------------------------------------ the connection cap


@pytest.fixture
def capped_server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path / "data", extra_env={"ARBITER_MAX_CONNECTIONS": "4"})
    yield running
    stop(running)


def busy(server: Server, source: str = "127.0.0.1") -> socket.socket:
    """A connection served once (so it is counted) and now in the middle of its
    next request's head (so it is not idle): the request and the start of the
    next go in one write, so both are read before the first reply is sent."""
    connection = connect(server, source)
    connection.sendall(GET + b"\r\n" + GET)
    assert read_reply(connection)[0] == 200
    return connection


def served(server: Server, source: str = "127.0.0.1") -> socket.socket:
    """A connection served once and now idle, waiting for its next request."""
    connection = connect(server, source)
    connection.sendall(GET + b"\r\n")
    assert read_reply(connection)[0] == 200
    return connection


def test_connections_over_the_cap_get_a_json_503_at_once(capped_server: Server) -> None:
    held = [busy(capped_server) for _ in range(4)]
    try:
        with connect(capped_server) as extra:
            started = time.monotonic()
            extra.sendall(GET + b"\r\n")
            status, headers, body = parse(read_until_closed(extra))
            elapsed = time.monotonic() - started
        assert status == 503
        assert headers["retry-after"] == "10"
        assert headers["content-type"] == "application/json"
        assert body["error"] == "/api/active_runs: too many connections, retry later"
        assert elapsed < HANG_GUARD  # answered, not held: how fast is the benchmark's
        held.pop().close()
        time.sleep(0.2)
        with connect(capped_server) as again:
            again.sendall(GET + b"\r\n")
            assert read_reply(again)[0] == 200
    finally:
        for connection in held:
            connection.close()


def test_at_the_cap_the_longest_idle_connection_makes_room(capped_server: Server) -> None:
    """A client holding idle connections up to the cap cannot keep others out:
    the newcomer is served and the connection idle the longest is closed."""
    held = [served(capped_server, "127.0.0.2") for _ in range(4)]
    try:
        with served(capped_server, "127.0.0.3") as newcomer:
            newcomer.sendall(GET + b"\r\n")
            assert read_reply(newcomer)[0] == 200
        assert read_until_closed(held[0]) == b""  # the longest idle, closed for it
    finally:
        for connection in held:
            connection.close()


@pytest.fixture
def shared_server(tmp_path: Path) -> Iterator[Server]:
    env = {"ARBITER_MAX_CONNECTIONS_PER_ADDRESS": "3", "FORWARDED_ALLOW_IPS": "127.0.0.1"}
    running = start_server(tmp_path / "data", extra_env=env)
    yield running
    stop(running)


def test_one_address_holds_at_most_its_share(shared_server: Server) -> None:
    """An address at its share is refused, whether its connections are busy or
    idle; another address is served, and so is the trusted proxy, which carries
    many clients and is not counted."""
    held = [busy(shared_server, "127.0.0.2") for _ in range(2)]
    held.append(served(shared_server, "127.0.0.2"))
    try:
        with connect(shared_server, "127.0.0.2") as extra:
            extra.sendall(GET + b"\r\n")
            status, headers, body = parse(read_until_closed(extra))
        assert (status, headers["retry-after"]) == (503, "10")
        assert (
            body["error"] == "/api/active_runs: too many connections from your address, retry later"
        )
        others = [served(shared_server, "127.0.0.3") for _ in range(3)]
        proxied = [served(shared_server, "127.0.0.1") for _ in range(5)]
        for connection in others + proxied:
            connection.close()
        held.pop().close()  # its share has room again once one closes
        with contextlib.closing(wait_for_a_place(shared_server, "127.0.0.2")) as again:
            again.sendall(GET + b"\r\n")
            assert read_reply(again)[0] == 200
    finally:
        for connection in held:
            connection.close()


def wait_for_a_place(server: Server, source: str) -> socket.socket:
    """A connection from `source` that the server admits, once the close of
    another has reached it (a refused one answers 503 and is tried again)."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        connection = connect(server, source)
        connection.sendall(GET + b"\r\n")
        status = read_reply(connection)[0]
        if status == 200:
            return connection
        connection.close()
        assert time.monotonic() < deadline, "the closed connection was never counted out"


REQUEST_MARK: contextvars.ContextVar[str] = contextvars.ContextVar("request_mark", default="")


async def marking_app(scope: Any, receive: Any, send: Any) -> None:
    """A raw ASGI app that marks its request's context, as the request-id middleware does."""
    if scope["type"] != "http":
        return
    REQUEST_MARK.set("the finished request")
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


async def one_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(GET + b"\r\n")
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    await reader.readexactly(2)  # "ok"
    return head


@contextlib.asynccontextmanager
async def serving(
    keep_alive: float = 75.0, app: Any = marking_app
) -> AsyncIterator[tuple[uvicorn.Server, int]]:
    """`app` under Arbiter's uvicorn setup in this loop, with this
    keep-alive timeout; the server and its port."""
    port = free_port()
    config = uvicorn_config(app, "127.0.0.1", port, "warning")
    config.timeout_keep_alive = keep_alive  # type: ignore[assignment]
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield server, port
    finally:
        server.should_exit = True
        await serving


async def closed_at(reader: asyncio.StreamReader) -> float:
    """When (time.monotonic) the server closes this connection."""
    assert await asyncio.wait_for(reader.read(), timeout=30) == b""
    return time.monotonic()


def test_an_idle_connection_keeps_nothing_of_its_finished_request() -> None:
    """Between requests a connection holds no finished cycle, scope or headers,
    and no keep-alive timer (with the request's context): with 10,000 idle
    connections each of those was two dozen live objects that every young
    collection of the garbage collector walked. Keep-alive still works."""

    async def scenario() -> None:
        async with serving() as (server, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert (await one_reply(reader, writer)).startswith(b"HTTP/1.1 200")
            (protocol,) = server.server_state.connections
            assert isinstance(protocol, LimitedHttpToolsProtocol)
            assert protocol.cycle is None
            assert dict(protocol.scope) == {}
            assert protocol.headers == []
            assert protocol.timeout_keep_alive_task is None
            assert list(protocol.idle.since) == [protocol]
            assert (await one_reply(reader, writer)).startswith(b"HTTP/1.1 200")  # served again
            writer.close()

    fresh_loop.run(scenario())


def test_a_connection_idle_past_the_keep_alive_timeout_is_closed() -> None:
    """The sweep closes an idle connection once its timeout is over, never
    before, and the oldest first; one that goes on asking stays open."""
    keep_alive = 0.8

    async def scenario() -> None:
        async with serving(keep_alive) as (_, port):
            # A connection turns idle when the server has sent its reply, between the
            # request's send and the reply's arrival: the timeout is counted from the
            # send, which comes before.
            first = await asyncio.open_connection("127.0.0.1", port)
            first_idle = time.monotonic()
            await one_reply(*first)
            await asyncio.sleep(keep_alive / 2)
            second = await asyncio.open_connection("127.0.0.1", port)
            second_idle = time.monotonic()
            await one_reply(*second)
            busy = await asyncio.open_connection("127.0.0.1", port)
            first_closed = asyncio.create_task(closed_at(first[0]))
            second_closed = asyncio.create_task(closed_at(second[0]))
            while not second_closed.done():  # the busy one asks more often than the timeout
                assert (await one_reply(*busy)).startswith(b"HTTP/1.1 200")
                await asyncio.sleep(keep_alive / 4)
            assert keep_alive <= await first_closed - first_idle < keep_alive + 5
            assert keep_alive <= await second_closed - second_idle < keep_alive + 5
            assert await first_closed <= await second_closed
            assert (await one_reply(*busy)).startswith(b"HTTP/1.1 200")
            for _, writer in (first, second, busy):
                writer.close()

    fresh_loop.run(scenario())


def test_a_connection_that_never_asks_is_closed_after_the_keep_alive_timeout() -> None:
    """Opened and left silent, a connection would hold a descriptor for ever
    (uvicorn arms its timer only after a response)."""
    keep_alive = 0.5

    async def scenario() -> None:
        async with serving(keep_alive) as (server, port):
            opened = time.monotonic()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert keep_alive <= await closed_at(reader) - opened < keep_alive + 5
            writer.close()
            assert not server.server_state.connections

    fresh_loop.run(scenario())


ENDLESS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
    "SELECT count(*) FROM c"
)


def test_a_request_whose_client_goes_away_stops_its_query(tmp_path: Path) -> None:
    """The app's request context, the protocol's `connection_lost` and the
    database's interrupt together: a client that sends a request and leaves
    stops the statement its request runs (here unbounded: only the leaving
    can stop it), and the threadpool thread is free again."""
    engine = make_engine(sqlite_url(tmp_path), request_seconds=0)
    storage = Storage(engine)
    started: list[RequestQueries] = []
    outcome: list[BaseException | None] = []

    def endless_query() -> None:
        try:
            with storage.read() as tx:
                tx.connection.exec_driver_sql(ENDLESS)
        except BaseException as error:
            outcome.append(error)
            raise
        outcome.append(None)

    async def endless(request: Request) -> Response:
        started.append(request.scope[QUERIES_KEY])
        await run_in_threadpool(endless_query)
        return PlainTextResponse("never")

    app = ArbiterApp(marking_app, routes=[Route("/endless", endless)])

    async def scenario() -> None:
        async with serving(app=app) as (_, port):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /endless HTTP/1.1\r\nhost: arbiter\r\n\r\n")
            await writer.drain()
            deadline = time.monotonic() + HANG_GUARD
            while not started or started[0].running() == 0:
                assert time.monotonic() < deadline, "the query never began"
                await asyncio.sleep(0.01)
            writer.close()
            while not outcome:
                assert time.monotonic() < deadline, "the query went on after the client left"
                await asyncio.sleep(0.01)

    try:
        fresh_loop.run(scenario())
    finally:
        engine.dispose()
    assert started[0].abandoned
    assert isinstance(outcome[0], QueryAbandoned)
