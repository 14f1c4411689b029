"""Errors: unknown routes (JSON under /api/, an HTML page elsewhere), and bad
requests answered with a 4xx and no traceback, in-process and from a real
`arbiter serve` process on a real socket."""

import socket
import time
from collections.abc import Iterator

import httpx2 as httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from arbiter.storage import QueryAbandoned, QueryTooLong
from arbiter.storage.request_bounds import ABANDONED
from arbiter.web.errors import exception_handlers
from tests.web.live_server import Server, start_server, stop


def test_unknown_api_route_is_json_404(client: TestClient) -> None:
    reply = client.get("/api/no_such_thing")
    assert reply.status_code == 404
    assert reply.headers["content-type"] == "application/json"
    payload = reply.json()
    assert payload["error"] == "/api/no_such_thing: no such API endpoint"
    assert "duration" in payload


def test_unknown_page_is_html_404(client: TestClient) -> None:
    reply = client.get("/no/such/page")
    assert reply.status_code == 404
    assert reply.headers["content-type"].startswith("text/html")
    assert "Page not found" in reply.text


def test_static_files_are_served(client: TestClient) -> None:
    reply = client.get("/static/style.css")
    assert reply.status_code == 200
    assert "text/css" in reply.headers["content-type"]


def test_invalid_utf8_in_a_json_body_is_a_400(client: TestClient) -> None:
    body = b'{"password": "\xff\xfe", "worker_info": {"username": "alice"}}'
    reply = client.post("/api/request_version", content=body)
    assert reply.status_code == 400
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["error"] == "/api/request_version: request is not valid UTF-8"


def test_a_5000_digit_count_is_a_400(client: TestClient) -> None:
    reply = client.get("/api/calc_elo", params={"W": "1" * 5000, "D": "1", "L": "1"})
    assert reply.status_code == 400
    assert reply.json()["error"] == "/api/calc_elo: parameter W is too large (at most 2^32 games)"


def test_api_errors_send_nosniff(client: TestClient) -> None:
    for reply in (client.get("/api/no_such_thing"), client.get("/api/active_runs")):
        assert reply.headers["x-content-type-options"] == "nosniff"


def stopped_query(request: Request) -> Response:
    raise QueryTooLong(15)


def abandoned_query(request: Request) -> Response:
    raise QueryAbandoned(ABANDONED)


@pytest.mark.parametrize("path", ["/api/slow", "/slow"])
def test_a_query_stopped_at_the_request_bound_is_a_503_to_retry(path: str) -> None:
    app = Starlette(routes=[Route(path, stopped_query)], exception_handlers=exception_handlers())
    reply = TestClient(app).get(path)
    assert reply.status_code == 503
    assert reply.headers["retry-after"]
    assert "a query ran past 15 s and was stopped; retry later" in reply.text


def test_an_abandoned_request_is_logged_as_499() -> None:
    app = Starlette(
        routes=[Route("/api/gone", abandoned_query)], exception_handlers=exception_handlers()
    )
    reply = TestClient(app).get("/api/gone")
    assert reply.status_code == 499
    assert "client went away" in reply.json()["error"]


# ---------------------------------------------------------------- a real server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("errors") / "data")
    yield running
    stop(running)


def raw_request(server: Server, request: bytes) -> bytes:
    """Send `request` as is and read until the server closes or goes quiet."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(request)
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
                if b"\r\n\r\n" in received:
                    break
        except TimeoutError:
            pass
    return received


def new_output(server: Server, since: int) -> str:
    time.sleep(0.3)  # the server logs after it answered
    return server.output()[since:]


def test_a_pgn_path_ending_in_a_newline_is_a_4xx_not_a_dropped_connection(
    server: Server,
) -> None:
    since = len(server.output())
    for path in (b"/api/pgn/0123456789abcdef01234567-1.pgn%0A", b"/api/run_pgns/abc.pgn.gz%0A"):
        reply = raw_request(server, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 404 "), reply
    assert "Traceback" not in new_output(server, since)


def test_a_client_that_leaves_mid_body_leaves_no_traceback(server: Server) -> None:
    since = len(server.output())
    host, port = server.url.removeprefix("http://").split(":")
    for path in ("/api/request_version", "/api/upload_pgn", "/api/actions", "/login"):
        with socket.create_connection((host, int(port)), timeout=5) as connection:
            connection.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f'Content-Length: 1000\r\n\r\n{{"password":'.encode()
            )
            time.sleep(0.2)  # the handler is waiting for the rest of the body
    output = new_output(server, since)
    assert "Traceback" not in output
    assert "ERROR" not in output
    assert httpx.get(server.url + "/api/active_runs").status_code == 200


def test_bad_bytes_and_absurd_numbers_are_400s_without_a_traceback(server: Server) -> None:
    since = len(server.output())
    bad_utf8 = httpx.post(server.url + "/api/request_version", content=b'{"password": "\xff"}')
    huge = httpx.get(server.url + "/api/calc_elo", params={"W": "1" * 5000, "D": "1", "L": "1"})
    assert (bad_utf8.status_code, huge.status_code) == (400, 400)
    assert bad_utf8.json()["error"] == "/api/request_version: request is not valid UTF-8"
    assert "Traceback" not in new_output(server, since)
