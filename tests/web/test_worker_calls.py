"""Worker calls served by one object (web/worker_calls.py), driven here with raw
ASGI messages: every check of the page stack's guards, in their order; the body
counted against its limit; the request id and the observers; errors answered
as the app's handlers and Starlette's outermost layer answer them. Then through
the whole app: a worker call's reply carries nosniff and its request id once."""

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import Message, Scope

from arbiter.domain.errors import NotFound
from arbiter.web import overload
from arbiter.web.errors import exception_handlers
from arbiter.web.middleware import STATE_KEY, BodyLimits
from arbiter.web.overload import LoopLag
from arbiter.web.replies import DEFAULT_RETRY_AFTER
from arbiter.web.request_id import current_request_id
from arbiter.web.worker_calls import WorkerCalls, WorkerGuards
from tests import fresh_loop
from tests.web.asgi_support import Sent, assert_json_error, assert_temporary_refusal, call

LIMITS = BodyLimits(10, 20, ("/api/upload_pgn",), {"/api/beat": 5})
ID = b"x-request-id"


class Switches:
    """The guards' inputs, each one a test can flip."""

    def __init__(self) -> None:
        self.lag = LoopLag()
        self.shutting_down = False
        self.primary = True
        self.lease: bool | None = None  # None: no lease kept at all


async def echo(request: Request) -> Response:
    """Reads the body; answers its length, with what it saw of the request."""
    body = await request.body()
    seen = {"id": current_request_id(), "started": request.scope[STATE_KEY]}
    return Response(b"%d" % len(body), headers={"x-seen": json.dumps(seen)})


async def fails(request: Request) -> Response:
    raise RuntimeError("a bug")


async def not_found(request: Request) -> Response:
    raise NotFound("no such task")


async def streams(request: Request) -> Response:
    async def parts() -> AsyncIterator[bytes]:
        yield b"one"
        yield b"two"

    return StreamingResponse(parts())


ENDPOINTS = {
    "/api/update_task": echo,
    "/api/beat": echo,
    "/api/upload_pgn": echo,
    "/api/request_task": echo,
    "/api/failed_task": fails,
    "/api/request_spsa": not_found,
    "/api/worker_log": streams,
}
Observed = list[tuple[str, int, float]]


def worker_calls(switches: Switches, observed: Observed) -> WorkerCalls:
    lease = None if switches.lease is None else (lambda: bool(switches.lease))
    guards = WorkerGuards(
        lag=switches.lag,
        is_shutting_down=lambda: switches.shutting_down,
        body_limits=LIMITS,
        is_primary=switches.primary,
        lease_held=lease,
    )
    routes = {path: Route(path, endpoint, methods=["POST"]) for path, endpoint in ENDPOINTS.items()}

    def observe(scope: object, method: str, status: int, seconds: float) -> None:
        observed.append((method, status, seconds))

    return WorkerCalls(routes, exception_handlers(), guards, [observe])


def served(
    path: str,
    switches: Switches | None = None,
    *,
    chunks: tuple[bytes, ...] = (b"",),
    declared: int | None = None,
) -> tuple[Sent, Observed]:
    """What one call sends, and what the observers saw."""
    observed: Observed = []
    headers = () if declared is None else ((b"content-length", b"%d" % declared),)
    app = worker_calls(switches or Switches(), observed)
    sent = call(app, path, method="POST", headers=headers, chunks=chunks)
    return sent, observed


END: Message = {"type": "http.request", "body": b"", "more_body": False}


def drive(path: str, messages: list[Message], sent: Sent, observed: Observed) -> None:
    """One call whose server messages are `messages` (then none: the client
    waits); what is sent goes to `sent`."""
    scope: Scope = {"type": "http", "method": "POST", "path": path, "headers": []}

    async def receive() -> Message:
        if not messages:
            await asyncio.Event().wait()
        return messages.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    fresh_loop.run(worker_calls(Switches(), observed)(scope, receive, send))


def without_id(sent: Sent) -> Sent:
    """The reply with its request id taken out (checked to be there once)."""
    headers = sent[0]["headers"]
    assert [name for name, _ in headers].count(ID) == 1
    return [{**sent[0], "headers": [h for h in headers if h[0] != ID]}, *sent[1:]]


def test_a_call_that_passes_every_guard_is_stamped_served_and_observed() -> None:
    before = time.perf_counter()
    sent, observed = served("/api/update_task", chunks=(b"ab", b"c"))
    start, body = sent
    headers = dict(start["headers"])
    seen = json.loads(headers[b"x-seen"])
    assert (start["status"], body["body"]) == (200, b"3")
    assert seen["id"] == headers[ID].decode()
    assert before <= seen["started"] <= time.perf_counter()
    assert headers[b"x-content-type-options"] == b"nosniff"
    ((method, status, seconds),) = observed
    assert (method, status) == ("POST", 200)
    assert 0 <= seconds < 5


def test_while_the_loop_lags_calls_are_turned_away_before_anything_else() -> None:
    switches = Switches()
    switches.lag.observe(overload.LAG_LIMIT + 0.1)
    switches.shutting_down, switches.primary = True, False  # shedding comes first
    sent, observed = served("/api/update_task", switches, declared=99)
    start, body = without_id(sent)
    assert (start["status"], dict(start["headers"])[b"retry-after"]) == (
        503,
        str(DEFAULT_RETRY_AFTER).encode(),
    )
    assert json.loads(body["body"]) == f"/api/update_task: {overload.SHED_MESSAGE}"
    assert observed[0][1] == 503
    busy, _ = served("/api/request_task", switches)
    assert busy[0]["status"] == 200
    assert b"too busy" in busy[1]["body"].lower()


def test_shutting_down_comes_before_the_body_and_role_checks() -> None:
    switches = Switches()
    switches.shutting_down, switches.primary = True, False
    sent, _ = served("/api/beat", switches, declared=99)
    message = "/api/beat: server is shutting down, retry shortly"
    assert_temporary_refusal(without_id(sent), 503, message)


@pytest.mark.parametrize(("path", "limit"), [("/api/beat", 5), ("/api/update_task", 10)])
def test_a_declared_body_over_its_path_limit_is_refused_unread(path: str, limit: int) -> None:
    switches = Switches()
    switches.primary = False  # the body limit comes before the role check
    sent, observed = served(path, switches, declared=limit + 1)
    assert_json_error(without_id(sent), 413, f"{path}: request body larger than {limit} bytes")
    assert observed[0][1] == 413
    fits, _ = served(path, declared=limit, chunks=(b"a" * limit,))
    assert fits[1]["body"] == b"%d" % limit


def test_a_body_of_undeclared_length_is_counted_as_it_is_read() -> None:
    fits, _ = served("/api/upload_pgn", chunks=(b"a" * 19, b"a"))
    assert fits[1]["body"] == b"20"
    over, observed = served("/api/upload_pgn", chunks=(b"a" * 19, b"aa"))
    assert_json_error(without_id(over), 413, "/api/upload_pgn: request body larger than 20 bytes")
    assert observed[0][1] == 413


def test_a_secondary_or_a_primary_without_its_lease_refuses_stateful_calls() -> None:
    secondary = Switches()
    secondary.primary = False
    sent, _ = served("/api/request_task", secondary)
    message = "/api/request_task: primary instance required"
    assert_temporary_refusal(without_id(sent), 503, message)
    assert served("/api/upload_pgn", secondary)[0][0]["status"] == 200
    lost = Switches()
    lost.lease = False
    sent, _ = served("/api/update_task", lost)
    message = "/api/update_task: primary lease lost, retry shortly"
    assert_temporary_refusal(without_id(sent), 503, message)
    lost.lease = True
    assert served("/api/update_task", lost)[0][0]["status"] == 200


def test_an_error_is_answered_by_the_apps_handler_for_its_class() -> None:
    sent, observed = served("/api/request_spsa")
    assert_json_error(without_id(sent), 404, "/api/request_spsa: no such task")
    assert observed[0][1] == 404


def test_an_unhandled_error_is_answered_with_a_json_500_then_raised() -> None:
    sent: Sent = []
    observed: Observed = []
    with pytest.raises(RuntimeError, match="a bug"):
        drive("/api/failed_task", [END], sent, observed)
    assert_json_error(without_id(sent), 500, "/api/failed_task: internal server error")
    assert observed[0][1] == 500


def test_a_client_that_leaves_mid_body_is_answered_into_the_void() -> None:
    sent: Sent = []
    observed: Observed = []
    drive(
        "/api/update_task",
        [{**END, "more_body": True}, {"type": "http.disconnect"}],
        sent,
        observed,
    )
    assert_json_error(
        without_id(sent), 400, "/api/update_task: the client disconnected before the body ended"
    )
    assert observed[0][1] == 400


def test_a_reply_that_sends_itself_gets_the_request_id_and_nosniff_too() -> None:
    sent: Sent = []
    observed: Observed = []
    drive("/api/worker_log", [END], sent, observed)
    start, *parts = sent
    headers = dict(start["headers"])
    assert ID in headers
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert b"".join(part.get("body", b"") for part in parts) == b"onetwo"
    assert observed[0][1] == 200


def test_a_worker_calls_reply_carries_nosniff_and_its_id_once(client: TestClient) -> None:
    for path in ("/api/request_version", "/api/update_task"):  # a reply and an error reply
        reply = client.post(path, json={"password": "nope", "worker_info": {}})
        for name in ("x-content-type-options", "x-request-id"):
            values = [v for k, v in reply.headers.multi_items() if k == name]
            assert len(values) == 1, (path, name, reply.status_code)
        assert reply.headers["x-content-type-options"] == "nosniff"
