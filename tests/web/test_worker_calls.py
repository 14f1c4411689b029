"""The worker calls' short path: `WorkerGuards` makes every check of the page
stack's guards in one layer (driven here with raw ASGI messages), and a worker
call's reply through the whole app carries nosniff once."""

import json
import time

import pytest
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Scope

from arbiter.web import overload
from arbiter.web.middleware import STATE_KEY, BodyLimits
from arbiter.web.overload import LoopLag
from arbiter.web.worker_calls import WorkerGuards
from tests.web.asgi_support import (
    assert_json_error,
    call,
    early_app,
    echo_app,
    error_reply,
    stream_app,
)

LIMITS = BodyLimits(10, 20, ("/api/upload_pgn",), {"/api/beat": 5})


class Switches:
    """The guards' inputs, each one a test can flip."""

    def __init__(self) -> None:
        self.lag = LoopLag()
        self.shutting_down = False
        self.primary = True
        self.lease: bool | None = None  # None: no lease kept at all


def guarded(app: ASGIApp, switches: Switches) -> WorkerGuards:
    lease = None if switches.lease is None else (lambda: bool(switches.lease))
    return WorkerGuards(
        app,
        lag=switches.lag,
        is_shutting_down=lambda: switches.shutting_down,
        body_limits=LIMITS,
        is_primary=switches.primary,
        lease_held=lease,
    )


def length(size: int) -> tuple[tuple[bytes, bytes], ...]:
    return ((b"content-length", str(size).encode()),)


def test_a_call_that_passes_every_guard_is_stamped_and_served() -> None:
    seen: list[Scope] = []
    before = time.perf_counter()
    sent = call(guarded(stream_app(seen), Switches()), "/api/update_task", headers=length(3))
    assert [m["type"] for m in sent] == ["http.response.start", *["http.response.body"] * 2]
    assert before <= seen[0][STATE_KEY] <= time.perf_counter()


def test_while_the_loop_lags_calls_are_turned_away_before_anything_else() -> None:
    switches = Switches()
    switches.lag.observe(overload.LAG_LIMIT + 0.1)
    switches.shutting_down, switches.primary = True, False  # shedding comes first
    app = guarded(stream_app([]), switches)
    status, headers, body = error_reply(call(app, "/api/update_task", headers=length(99)))
    assert (status, headers[b"retry-after"]) == (503, overload.RETRY_AFTER.encode())
    assert json.loads(body)["error"] == f"/api/update_task: {overload.SHED_MESSAGE}"
    busy = call(app, "/api/request_task")
    assert busy[0]["status"] == 200
    assert b"too busy" in busy[1]["body"].lower()


def test_shutting_down_comes_before_the_body_and_role_checks() -> None:
    switches = Switches()
    switches.shutting_down, switches.primary = True, False
    sent = call(guarded(stream_app([]), switches), "/api/beat", headers=length(99))
    assert_json_error(sent, 503, "/api/beat: server is shutting down, retry shortly")


@pytest.mark.parametrize(("path", "limit"), [("/api/beat", 5), ("/api/update_task", 10)])
def test_a_declared_body_over_its_path_limit_is_refused_unread(path: str, limit: int) -> None:
    switches = Switches()
    switches.primary = False  # the body limit comes before the role check
    sent = call(guarded(stream_app([]), switches), path, headers=length(limit + 1))
    assert_json_error(sent, 413, f"{path}: request body larger than {limit} bytes")
    fits = call(guarded(echo_app, Switches()), path, headers=length(limit), chunks=(b"a" * limit,))
    assert fits[1]["body"] == b"%d" % limit


def test_a_body_of_undeclared_length_is_counted_as_it_streams() -> None:
    app = guarded(echo_app, Switches())
    assert call(app, "/api/upload_pgn", chunks=(b"a" * 19, b"a"))[1]["body"] == b"20"
    over = call(app, "/api/upload_pgn", chunks=(b"a" * 19, b"aa"))
    assert_json_error(over, 413, "/api/upload_pgn: request body larger than 20 bytes")
    started = call(guarded(early_app, Switches()), "/api/update_task", chunks=(b"a" * 6,) * 2)
    assert started == [{"type": "http.response.start", "status": 200, "headers": []}]


def test_a_secondary_or_a_primary_without_its_lease_refuses_stateful_calls() -> None:
    secondary = Switches()
    secondary.primary = False
    sent = call(guarded(stream_app([]), secondary), "/api/request_task")
    assert_json_error(sent, 503, "/api/request_task: primary instance required")
    assert len(call(guarded(stream_app([]), secondary), "/api/upload_pgn")) == 3
    lost = Switches()
    lost.lease = False
    sent = call(guarded(stream_app([]), lost), "/api/update_task")
    assert_json_error(sent, 503, "/api/update_task: primary lease lost, retry shortly")
    lost.lease = True
    assert len(call(guarded(stream_app([]), lost), "/api/update_task")) == 3


def test_a_worker_calls_reply_carries_nosniff_once(client: TestClient) -> None:
    for path in ("/api/request_version", "/api/update_task"):  # a reply and an error reply
        reply = client.post(path, json={"password": "nope", "worker_info": {}})
        values = [v for k, v in reply.headers.multi_items() if k == "x-content-type-options"]
        assert values == ["nosniff"], (path, reply.status_code)
