"""deploy/nginx/arbiter.conf sends each route where it can be served: its map
is evaluated as nginx does (exact strings, then regexes in order, then the
default) for every route of the table, against what a secondary really does
with it: a GET a secondary refuses must go to the primary, every state
change (POST) goes to the primary but the two a secondary serves."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from arbiter.protocol import WORKER_PATHS
from arbiter.web.routes import MONITORING_PATHS, routes
from tests.web.api_support import api_client, api_settings, submit, users
from tests.web.support import log_in

SITE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "arbiter.conf"
SECONDARY_POSTS = {"/api/upload_pgn", "/api/actions"}
_ENTRY = re.compile(r'^\s*(default|"[^"]*")\s+(\w+);', re.MULTILINE)


def nginx_map() -> tuple[dict[str, str], list[tuple[re.Pattern[str], str]], str]:
    text = SITE.read_text()
    block = text[text.index('map "$request_method $uri"') :]
    block = block[: block.index("\n}")]
    exact, regexes, default = {}, [], ""
    for key, upstream in _ENTRY.findall(block):
        if key == "default":
            default = upstream
        elif key.startswith('"~'):
            regexes.append((re.compile(key[2:-1]), upstream))
        else:
            exact[key[1:-1]] = upstream
    return exact, regexes, default


def upstream_of(method: str, path: str) -> str:
    exact, regexes, default = nginx_map()
    key = f"{method} {path}"
    if key in exact:
        return exact[key]
    for pattern, upstream in regexes:
        if pattern.search(key):
            return upstream
    return default


def concrete(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values[m.group(1)], path)


def table(method: str) -> list[str]:
    return sorted(
        route.path
        for route in routes()
        if isinstance(route, Route) and method in (route.methods or ())
    )


@pytest.fixture
def secondary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_url: str
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A logged-in approver on a secondary, and a run, a user, a worker to look at."""
    with api_client(api_settings(tmp_path, ""), monkeypatch) as primary:
        alice, _root = users(primary)
        run_id = submit(primary, "alice", repo_url)
    values = {"run_id": run_id, "task_id": "0", "username": alice.username, "token_id": "1"}
    values |= {"worker_name": "alice-4cores-abcd", "name": "x", "hook_id": "1"}
    with api_client(api_settings(tmp_path, "", role="secondary"), monkeypatch) as client:
        log_in(client, "root")
        yield client, values


def test_every_page_a_secondary_refuses_is_sent_to_the_primary(
    secondary: tuple[TestClient, dict[str, str]],
) -> None:
    client, values = secondary
    refused = []
    for path in table("GET"):
        if path in MONITORING_PATHS or path.startswith("/api/"):
            continue
        reply = client.get(concrete(path, values), follow_redirects=False)
        if reply.status_code == 503:
            refused.append(path)
        else:
            assert upstream_of("GET", path) == "arbiter_secondaries", path
    assert refused == ["/tests/run"]  # the new-test form (reschedules read live runs)
    for path in refused:
        assert upstream_of("GET", path) == upstream_of("HEAD", path) == "arbiter_primary"


def test_every_state_change_goes_to_the_primary_but_the_two_a_secondary_serves() -> None:
    values = {"run_id": "r", "username": "u", "token_id": "1", "worker_name": "w", "hook_id": "1"}
    for path in table("POST"):
        expected = "arbiter_secondaries" if path in SECONDARY_POSTS else "arbiter_primary"
        assert upstream_of("POST", concrete(path, values)) == expected, path
    for path in set(WORKER_PATHS) - SECONDARY_POSTS:
        assert upstream_of("POST", path) == "arbiter_primary", path


def test_reads_of_the_api_go_to_the_secondaries() -> None:
    for path in ("/api/get_run/abc", "/api/nn/nn-0123456789ab.nnue", "/api/book/a.epd", "/tests"):
        assert upstream_of("GET", path) == "arbiter_secondaries"
        assert upstream_of("HEAD", path) == "arbiter_secondaries"


def test_the_signed_worker_package_comes_from_the_primary() -> None:
    """Each process signs the package with the key of its own data dir: the
    primary's is the one workers pin (a standby primary gets the same file)."""
    for path in ("/api/worker/package.json", "/api/worker/package", "/api/worker/a.whl"):
        assert upstream_of("GET", path) == upstream_of("HEAD", path) == "arbiter_primary"
