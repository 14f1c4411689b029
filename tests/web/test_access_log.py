"""The access log: one line per request with method, route, status, duration,
client and user; in-process, and from a real `arbiter serve` process."""

import logging
import re
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from starlette.testclient import TestClient

from arbiter.runtime.settings import Settings
from arbiter.web.access_log import AccessLog
from arbiter.web.app import create_app
from arbiter.web.observed import ObservedRequestsMiddleware
from arbiter.web.request_id import RequestIdMiddleware
from tests.web.live_server import PASSWORD, create_user, start_server, stop
from tests.web.support import STRONG_PASSWORD, log_in, make_user

TEXT_LINE = re.compile(r" INFO arbiter\.access \[[0-9a-f]{8}-[0-9a-f]+\]: (.*)")
LINE = re.compile(r"(\S+) (\S+) (\d{3}) (\d+\.\d)ms (\S+) (\S+)")


def access_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, ...]]:
    lines = [r.getMessage() for r in caplog.records if r.name == "arbiter.access"]
    parsed = [LINE.fullmatch(line) for line in lines]
    assert all(parsed), lines
    return [match.groups() for match in parsed if match]


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="arbiter.access")
    return caplog


def test_a_worker_call_is_logged_with_its_route_status_client_and_user(
    client: TestClient, logged: pytest.LogCaptureFixture
) -> None:
    make_user(client, "alice")
    body = {"password": STRONG_PASSWORD, "worker_info": {"username": "alice"}}
    assert client.post("/api/request_version", json=body).status_code == 200
    [(method, route, status, _ms, address, user)] = access_lines(logged)
    assert (method, route, status, address, user) == (
        "POST",
        "/api/request_version",
        "200",
        "testclient",
        "alice",
    )


def test_routes_are_logged_as_templates_and_pages_with_the_session_user(
    client: TestClient, logged: pytest.LogCaptureFixture
) -> None:
    make_user(client, "bob")
    log_in(client, "bob")
    logged.clear()
    client.get("/api/get_run/0123456789abcdef01234567")
    client.get("/tests")
    client.head("/api/nn/nn-000000000000.nnue")
    lines = [(m, r, s, u) for m, r, s, _ms, _a, u in access_lines(logged)]
    assert lines == [
        ("GET", "/api/get_run/{run_id}", "404", "bob"),
        ("GET", "/tests", "200", "bob"),
        ("HEAD", "/api/nn/{name}", "404", "bob"),
    ]


def test_an_unrouted_path_is_logged_escaped_on_one_line(
    client: TestClient, logged: pytest.LogCaptureFixture
) -> None:
    client.get("/no such/page%0Afake 200 line")
    [(method, route, status, _ms, _address, user)] = access_lines(logged)
    assert (method, route, status, user) == (
        "GET",
        "/no%20such/page%0Afake%20200%20line",
        "404",
        "-",
    )


def test_a_disabled_logger_logs_nothing(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="arbiter.access")
    client.get("/api/active_runs")
    assert [r for r in caplog.records if r.name == "arbiter.access"] == []


def test_the_setting_leaves_the_access_log_out(settings: Settings) -> None:
    def outermost(app_settings: Settings) -> list[Any]:
        return create_app(app_settings).user_middleware[:2]

    # Outermost but for the request id, which its line carries.
    request_id, observed = outermost(settings)
    assert (request_id.cls, observed.cls) == (RequestIdMiddleware, ObservedRequestsMiddleware)
    assert any(isinstance(o, AccessLog) for o in observed.kwargs["observers"])
    _, observed = outermost(settings.with_changes(access_log=False))
    assert not any(isinstance(o, AccessLog) for o in observed.kwargs["observers"])


def test_a_real_server_logs_one_line_per_request(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_server(data_dir)
    try:
        create_user(data_dir, "carol")
        body = {"password": PASSWORD, "worker_info": {"username": "carol"}}
        assert httpx.post(server.url + "/api/request_version", json=body).status_code == 200
        assert httpx.get(server.url + "/api/calc_elo?W=1").status_code == 400
    finally:
        stop(server)
    # "<time> INFO arbiter.access [<request id>]: <line>"
    found = [TEXT_LINE.search(line) for line in server.output().splitlines()]
    requests = [match.group(1) for match in found if match]
    assert any(
        LINE.fullmatch(r)
        and r.startswith("POST /api/request_version 200 ")
        and r.endswith(" 127.0.0.1 carol")
        for r in requests
    ), requests
    assert any(
        r.startswith("GET /api/calc_elo 400 ") and r.endswith(" 127.0.0.1 -") for r in requests
    ), requests
    assert "uvicorn.access" not in server.output()  # uvicorn's own access log stays off
