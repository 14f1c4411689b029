"""The pure ASGI middleware: HEAD, shutdown guard, secondary role, headers, body limit."""

import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from arbiter.protocol import WORKER_PATHS
from arbiter.runtime.settings import Settings
from arbiter.web.app import create_app
from arbiter.web.middleware import (
    CONTENT_SECURITY_POLICY,
    STATE_KEY,
    BodySizeLimitMiddleware,
    HeadMethodMiddleware,
    RejectNonPrimaryWorkerApiMiddleware,
    RequestStateMiddleware,
    SecurityHeadersMiddleware,
    ShutdownGuardMiddleware,
    is_head_request,
    request_started_at,
)
from tests.web.api_support import PRIMARY_ONLY_WORKER_PATHS
from tests.web.asgi_support import (
    assert_json_error,
    assert_page_error,
    assert_temporary_refusal,
    call,
    early_app,
    echo_app,
    stream_app,
)
from tests.web.support import state


def test_head_is_served_as_get_without_body(client: TestClient) -> None:
    reply = client.head("/login")
    assert reply.status_code == 200
    assert reply.content == b""
    assert int(reply.headers["content-length"]) > 0


def test_shutdown_guard_refuses_new_requests(client: TestClient) -> None:
    state(client).shutting_down = True
    api = client.post("/api/request_version", json={})
    assert api.status_code == 503
    assert api.json() == "/api/request_version: server is shutting down, retry shortly"
    assert api.headers["retry-after"] == "5"
    assert client.get("/api/active_runs").json()["error"].startswith("/api/active_runs: ")
    assert client.get("/tests").status_code == 503
    state(client).shutting_down = False


@pytest.fixture
def secondary(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings.with_changes(role="secondary"))) as test_client:
        yield test_client


def test_the_worker_api_is_the_nine_paths_of_the_protocol() -> None:
    """Written out, so a path dropped from (or added to) the protocol is seen here."""
    assert set(WORKER_PATHS) == {*PRIMARY_ONLY_WORKER_PATHS, "/api/upload_pgn"}


@pytest.mark.parametrize("path", PRIMARY_ONLY_WORKER_PATHS)
def test_secondary_answers_worker_calls_with_json_503(secondary: TestClient, path: str) -> None:
    reply = secondary.post(path, json={})
    assert reply.status_code == 503
    assert reply.json() == f"{path}: primary instance required"
    assert reply.headers["retry-after"] == "5"


def test_secondary_takes_pgn_uploads(secondary: TestClient) -> None:
    """The one stateless worker call: it reaches its handler (which checks the body)."""
    reply = secondary.post("/api/upload_pgn", json={})
    assert reply.status_code == 400


def test_secondary_still_serves_pages_and_reads(secondary: TestClient) -> None:
    assert secondary.get("/tests").status_code == 200
    assert secondary.get("/api/calc_elo", params={"W": 10, "D": 20, "L": 5}).status_code == 200


def test_pages_carry_security_headers(client: TestClient) -> None:
    headers = client.get("/login").headers
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"


def test_declared_oversized_form_is_refused(client: TestClient) -> None:
    reply = client.post(
        "/login", content=b"a" * (3 * 1024 * 1024), headers={"content-type": "text/plain"}
    )
    assert reply.status_code == 413


def oversized_chunks(total: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """A body with no Content-Length: httpx sends it chunked."""
    for _ in range(total // chunk):
        yield b"a" * chunk


@pytest.mark.parametrize("path", ["/api/request_task", "/api/update_task"])
def test_streamed_oversized_body_is_refused(client: TestClient, path: str) -> None:
    """A chunked body declares no length: it is counted as it streams and cut off."""
    reply = client.post(
        path, content=oversized_chunks(3 * 1024 * 1024), headers={"content-type": "text/plain"}
    )
    assert "content-length" not in reply.request.headers
    assert reply.request.headers["transfer-encoding"] == "chunked"
    assert reply.status_code == 413


# --- each middleware on its own, driven with raw ASGI messages ---
# The replies above go through the whole app; these pin down the messages each
# middleware sends, which a test client would hide (a HEAD's body parts, a
# second response start).


def test_head_sends_one_empty_final_body_to_the_client() -> None:
    seen: list[Scope] = []
    sent = call(HeadMethodMiddleware(stream_app(seen)), method="HEAD")
    assert sent == [
        {"type": "http.response.start", "status": 200, "headers": [(b"x-inner", b"1")]},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]
    assert seen[0]["method"] == "GET"
    assert is_head_request(seen[0])


def test_head_passes_the_request_body_on() -> None:
    """A handler may read the (empty) body of a HEAD, as of any request."""
    sent = call(HeadMethodMiddleware(echo_app), method="HEAD")
    assert sent == [
        {"type": "http.response.start", "status": 200, "headers": []},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]


@pytest.mark.parametrize(("kind", "method"), [("http", "GET"), ("websocket", "HEAD")])
def test_head_leaves_other_requests_alone(kind: str, method: str) -> None:
    seen: list[Scope] = []
    sent = call(HeadMethodMiddleware(stream_app(seen)), method=method, kind=kind)
    assert [m.get("body") for m in sent] == [None, b"one", b"two"]
    assert seen[0]["method"] == method
    assert not is_head_request(seen[0])


def test_request_state_stamps_http_requests_only() -> None:
    seen: list[Scope] = []
    before = time.perf_counter()
    call(RequestStateMiddleware(stream_app(seen)))
    call(RequestStateMiddleware(stream_app(seen)), kind="websocket")
    assert before <= seen[0][STATE_KEY] <= time.perf_counter()
    assert request_started_at(seen[0]) == seen[0][STATE_KEY]
    assert STATE_KEY not in seen[1]
    assert before <= request_started_at(seen[1])  # unstamped: measured from now


@pytest.mark.parametrize("path", ["/api/active_runs", "/api"])
def test_shutdown_guard_answers_api_paths_in_json(path: str) -> None:
    guard = ShutdownGuardMiddleware(stream_app([]), is_shutting_down=lambda: True)
    assert_json_error(call(guard, path), 503, f"{path}: server is shutting down, retry shortly")


@pytest.mark.parametrize("path", WORKER_PATHS)
def test_shutdown_guard_refuses_worker_calls_for_now(path: str) -> None:
    guard = ShutdownGuardMiddleware(stream_app([]), is_shutting_down=lambda: True)
    message = f"{path}: server is shutting down, retry shortly"
    assert_temporary_refusal(call(guard, path), 503, message)


@pytest.mark.parametrize("path", ["/tests", "/apis", "/"])
def test_shutdown_guard_answers_pages_in_html(path: str) -> None:
    guard = ShutdownGuardMiddleware(stream_app([]), is_shutting_down=lambda: True)
    assert_page_error(call(guard, path), 503, "server is shutting down, retry shortly")


def test_shutdown_guard_passes_requests_before_shutdown_and_other_scopes() -> None:
    seen: list[Scope] = []
    running = ShutdownGuardMiddleware(stream_app(seen), is_shutting_down=lambda: False)
    assert len(call(running)) == 3
    stopping = ShutdownGuardMiddleware(stream_app(seen), is_shutting_down=lambda: True)
    assert len(call(stopping, kind="websocket")) == 3
    assert len(seen) == 2


def limited(app: ASGIApp) -> BodySizeLimitMiddleware:
    """10 bytes in general, 20 under /upload, 5 on /tiny."""
    return BodySizeLimitMiddleware(
        app, limit=10, upload_limit=20, upload_paths=("/upload",), path_limits={"/tiny": 5}
    )


@pytest.mark.parametrize(
    ("path", "limit"), [("/page", 10), ("/upload/pgn", 20), ("/tiny", 5), ("/api/x", 10)]
)
def test_body_limit_takes_a_declared_length_up_to_the_limit(path: str, limit: int) -> None:
    body = b"a" * limit
    length = ((b"content-length", str(limit).encode()),)
    assert call(limited(echo_app), path, headers=length, chunks=(body,))[1]["body"] == b"%d" % limit


@pytest.mark.parametrize(("path", "limit"), [("/page", 10), ("/upload/pgn", 20), ("/tiny", 5)])
def test_body_limit_refuses_a_declared_length_over_it_unread(path: str, limit: int) -> None:
    length = ((b"content-length", str(limit + 1).encode()),)
    sent = call(limited(stream_app([])), path, headers=length)
    assert_page_error(sent, 413, f"request body larger than {limit} bytes")


@pytest.mark.parametrize(("path", "limit"), [("/api/x", 10), ("/upload/pgn", 20), ("/tiny", 5)])
def test_body_limit_counts_a_streamed_body(path: str, limit: int) -> None:
    whole = (b"a" * (limit - 1), b"a")
    assert call(limited(echo_app), path, chunks=whole)[1]["body"] == b"%d" % limit
    over = (b"a" * (limit - 1), b"aa")
    sent = call(limited(echo_app), path, chunks=over)
    if path.startswith("/api"):
        assert_json_error(sent, 413, f"{path}: request body larger than {limit} bytes")
    else:
        assert_page_error(sent, 413, f"request body larger than {limit} bytes")


def test_body_limit_counts_a_body_whose_length_is_not_a_number() -> None:
    garbled = ((b"content-length", b"ten"),)
    assert call(limited(echo_app), headers=garbled, chunks=(b"a" * 10,))[1]["body"] == b"10"
    sent = call(limited(echo_app), headers=garbled, chunks=(b"a" * 11,))
    assert_page_error(sent, 413, "request body larger than 10 bytes")


def test_body_limit_reads_only_the_content_length_header() -> None:
    other = ((b"x-content-length", b"99"),)
    assert call(limited(echo_app), headers=other, chunks=(b"a" * 10,))[1]["body"] == b"10"


def test_body_limit_sends_no_second_reply_once_one_started() -> None:
    sent = call(limited(early_app), chunks=(b"a" * 6, b"a" * 6))
    assert sent == [{"type": "http.response.start", "status": 200, "headers": []}]


def test_body_limit_leaves_other_scopes_alone() -> None:
    length = ((b"content-length", b"99"),)
    assert len(call(limited(stream_app([])), kind="websocket", headers=length)) == 3


@pytest.mark.parametrize("path", PRIMARY_ONLY_WORKER_PATHS)
def test_a_primary_that_lost_its_lease_refuses_worker_calls(path: str) -> None:
    lost = RejectNonPrimaryWorkerApiMiddleware(stream_app([]), True, lease_held=lambda: False)
    message = f"{path}: primary lease lost, retry shortly"
    assert_temporary_refusal(call(lost, path), 503, message)
    secondary = RejectNonPrimaryWorkerApiMiddleware(stream_app([]), False)
    assert_temporary_refusal(call(secondary, path), 503, f"{path}: primary instance required")


def test_a_primary_serves_worker_calls_with_its_lease_or_without_one() -> None:
    seen: list[Scope] = []
    held = RejectNonPrimaryWorkerApiMiddleware(stream_app(seen), True, lease_held=lambda: True)
    alone = RejectNonPrimaryWorkerApiMiddleware(stream_app(seen), True)
    assert len(call(held, "/api/request_task")) == 3
    assert len(call(alone, "/api/request_task")) == 3
    assert len(seen) == 2


def test_a_secondary_passes_uploads_pages_and_other_scopes() -> None:
    seen: list[Scope] = []
    secondary = RejectNonPrimaryWorkerApiMiddleware(stream_app(seen), False)
    for path in ("/api/upload_pgn", "/api/active_runs", "/tests"):
        assert len(call(secondary, path)) == 3
    assert len(call(secondary, "/api/request_task", kind="websocket")) == 3
    assert len(seen) == 4


def test_pages_get_every_security_header_once() -> None:
    sent = call(SecurityHeadersMiddleware(stream_app([])))
    assert sent[0]["headers"] == [
        (b"x-inner", b"1"),
        (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),
        (b"x-frame-options", b"DENY"),
    ]
    assert [m.get("body") for m in sent[1:]] == [b"one", b"two"]


def test_api_replies_get_nosniff_only() -> None:
    sent = call(SecurityHeadersMiddleware(stream_app([])), "/api/active_runs")
    assert sent[0]["headers"] == [(b"x-inner", b"1"), (b"x-content-type-options", b"nosniff")]


def test_a_header_the_handler_set_is_not_repeated() -> None:
    async def framed(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"x-frame-options", b"SAMEORIGIN")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    names = [name for name, _ in call(SecurityHeadersMiddleware(framed))[0]["headers"]]
    assert names.count(b"x-frame-options") == 1
    assert len(names) == 4


def test_other_scopes_get_no_security_headers() -> None:
    sent = call(SecurityHeadersMiddleware(stream_app([])), kind="websocket")
    assert sent[0]["headers"] == [(b"x-inner", b"1")]


def test_a_reply_started_without_headers_gets_them_all() -> None:
    """ASGI lets a response start leave `headers` out (none)."""

    async def bare(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 204})
        await send({"type": "http.response.body", "body": b""})

    sent = call(SecurityHeadersMiddleware(bare), "/api/x")
    assert sent[0] == {
        "type": "http.response.start",
        "status": 204,
        "headers": [(b"x-content-type-options", b"nosniff")],
    }
