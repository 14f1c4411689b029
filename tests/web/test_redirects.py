"""Redirects carry a path, never a host taken from the request."""

import pytest
from starlette.responses import PlainTextResponse
from starlette.routing import Route, Router
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from arbiter.web.redirects import SlashRedirect, relative_slash_redirects

FORGED = {"host": "evil.example"}


def test_a_trailing_slash_redirects_to_a_path_not_to_the_host_sent(client: TestClient) -> None:
    reply = client.get("/tests/", headers=FORGED, follow_redirects=False)
    assert reply.status_code == 307
    assert reply.headers["location"] == "/tests"
    assert client.get("/tests/", follow_redirects=True).status_code == 200


def test_the_query_string_is_kept(client: TestClient) -> None:
    reply = client.get("/api/active_runs/?x=1&y=%20", headers=FORGED, follow_redirects=False)
    assert reply.headers["location"] == "/api/active_runs?x=1&y=%20"


def test_a_missing_slash_is_added_as_a_path(client: TestClient) -> None:
    reply = client.get("/static", headers=FORGED, follow_redirects=False)
    assert (reply.status_code, reply.headers["location"]) == (307, "/static/")


@pytest.mark.parametrize("path", ["/no/such/page/", "/api/nope/"])
def test_no_route_no_redirect(client: TestClient, path: str) -> None:
    reply = client.get(path, headers=FORGED, follow_redirects=False)
    assert reply.status_code == 404
    assert "location" not in reply.headers


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("ok")(scope, receive, send)


def test_a_path_that_would_name_another_host_is_never_a_location() -> None:
    # "//evil.example" is a protocol-relative URL: with a route that takes any
    # path, the slash redirect would send the visitor to evil.example.
    catch_all = Router([Route("/{rest:path}/", _ok)], redirect_slashes=False)
    relative_slash_redirects(catch_all)
    client = TestClient(catch_all)
    assert client.get("/x", follow_redirects=False).headers["location"] == "/x/"
    scope = {"type": "http", "path": "//evil.example", "root_path": "", "query_string": b""}
    assert isinstance(catch_all.default, SlashRedirect)
    assert catch_all.default._location(scope) is None


def test_every_redirect_of_the_pages_is_a_path(client: TestClient) -> None:
    for path in ("/", "/user", "/upload", "/user_management"):
        reply = client.get(path, headers=FORGED, follow_redirects=False)
        assert reply.status_code in (302, 303, 307), path
        assert reply.headers["location"].startswith("/"), path
        assert not reply.headers["location"].startswith("//"), path
