"""Logs: JSON lines with ARBITER_LOG_FORMAT=json, and each request's id in its
reply, its access line and the application lines written while serving it."""

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from arbiter.web.logs import configure_logging
from arbiter.web.request_id import current_request_id
from tests.web.api_support import api_client, api_settings
from tests.web.live_server import start_server, stop


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    configure_logging("info", "json", stream)
    yield stream
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


def records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_request_gets_an_id_in_its_reply_and_its_json_access_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_log: io.StringIO
) -> None:
    with api_client(api_settings(tmp_path, ""), monkeypatch) as client:
        first = client.get("/api/get_run/0123456789abcdef01234567")
        second = client.get("/healthz")
    ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert len(set(ids)) == 2
    access = [r for r in records(json_log) if r["logger"] == "arbiter.access"]
    assert [(r["request_id"], r["route"], r["status"]) for r in access] == [
        (ids[0], "/api/get_run/{run_id}", 404),
        (ids[1], "/healthz", 200),
    ]
    assert access[0]["method"] == "GET"
    assert access[0]["user"] == "-"
    assert isinstance(access[0]["duration_ms"], float)
    assert str(access[0]["time"]).endswith("+00:00")


def test_the_proxys_request_id_is_kept_when_it_looks_like_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with api_client(api_settings(tmp_path, ""), monkeypatch) as client:
        kept = client.get("/healthz", headers={"X-Request-ID": "0af3c9e1d2b4"})
        replaced = client.get("/healthz", headers={"X-Request-ID": "bad id; x"})
    assert kept.headers["x-request-id"] == "0af3c9e1d2b4"
    made = replaced.headers["x-request-id"]
    assert made != "bad id; x"
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]+", made), made


def test_application_lines_written_in_the_threadpool_carry_the_request_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_log: io.StringIO
) -> None:
    seen: list[str] = []
    from arbiter.web import health

    real = health.readiness

    def readiness_that_logs(state):  # type: ignore[no-untyped-def]
        seen.append(current_request_id())
        logging.getLogger("arbiter.test").warning("checking readiness")
        return real(state)

    monkeypatch.setattr(health, "readiness", readiness_that_logs)
    with api_client(api_settings(tmp_path, ""), monkeypatch) as client:
        reply = client.get("/readyz", headers={"X-Request-ID": "probe-1"})
    assert seen == ["probe-1"]
    [line] = [r for r in records(json_log) if r["logger"] == "arbiter.test"]
    assert (line["request_id"], line["level"], line["message"]) == (
        "probe-1",
        "warning",
        "checking readiness",
    )
    assert reply.headers["x-request-id"] == "probe-1"


def test_a_served_process_writes_json_lines_only(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", extra_env={"ARBITER_LOG_FORMAT": "json"})
    try:
        reply = httpx.get(server.url + "/readyz", headers={"X-Request-ID": "from-nginx-7"})
        assert reply.status_code == 200
    finally:
        stop(server)
    lines = [line for line in server.output().splitlines() if line.startswith("{")]
    parsed = [json.loads(line) for line in lines]
    assert any(
        r["logger"] == "arbiter.access" and r["request_id"] == "from-nginx-7" for r in parsed
    )
    assert any(r["logger"] == "arbiter" and "ready" in str(r["message"]) for r in parsed)
    # Everything after the banner is JSON: nothing else writes to the log.
    after_banner = server.output().split("then log in at", 1)[1].splitlines()[1:]
    assert all(line.startswith("{") for line in after_banner if line), after_banner
