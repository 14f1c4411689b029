"""The pure ASGI middleware: HEAD, shutdown guard, secondary role, headers, body limit."""

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from arbiter.protocol import WORKER_PATHS
from arbiter.web.app import create_app
from arbiter.web.settings import Settings
from tests.web.api_support import PRIMARY_ONLY_WORKER_PATHS
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
    assert api.json()["error"].startswith("/api/request_version: ")
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
    assert reply.json()["error"] == f"{path}: primary instance required"
    assert "duration" in reply.json()


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
