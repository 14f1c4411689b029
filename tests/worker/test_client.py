"""The protocol client against a scripted server (httpx MockTransport)."""

from typing import Any

import httpx2 as httpx
import pytest

from arbiter.protocol.messages import SpsaResult, Stats
from arbiter.worker.client import (
    TEMPORARY_PATIENCE,
    UPDATE_ATTEMPTS,
    NotFoundError,
    Reported,
    ServerError,
    TemporaryRefusalError,
    TransportError,
)
from arbiter.worker.errors import CredentialsError
from tests.worker.fakes import RUN_ID, FakeServer

STATS = Stats(1, 0, 1, 0, 0, [0, 0, 0, 1, 0])


def test_request_version_checks_credentials() -> None:
    server = FakeServer(lambda _p, _b: {"version": 325})
    assert server.client().request_version() == 325
    refused = FakeServer(
        lambda _p, _b: httpx.Response(
            401, json={"error": "/api/request_version: Invalid username or password."}
        )
    )
    with pytest.raises(CredentialsError, match="Invalid username or password"):
        refused.client().request_version()


def test_every_body_is_valid_for_the_server() -> None:
    server = FakeServer(
        lambda _p, _b: {"task_alive": True, "w_params": [], "b_params": [], "sig": 1}
    )
    client = server.client()
    client.request_task()
    client.update_task(RUN_ID, 3, STATS, SpsaResult(1, 0, 1, 2, 99))
    client.beat(RUN_ID, 3)
    client.request_spsa(RUN_ID, 3)
    client.failed_task(RUN_ID, 3, "broken")
    client.stop_run(RUN_ID, 3, "wrong bench")
    client.upload_pgn(RUN_ID, 3, "H4sI")
    client.worker_log("hello")
    client.worker_log("hello", RUN_ID, 3)
    assert len(server.calls) == 9
    update = server.calls[1][1]
    assert update["password"] == "secret"
    assert update["stats"]["pentanomial"] == [0, 0, 0, 1, 0]
    assert update["spsa"]["sig"] == 99


def test_update_task_retries_transport_failures() -> None:
    failures = iter([httpx.ConnectError("down"), httpx.Response(502, text="Bad Gateway")])
    waits: list[float] = []

    def handler(_path: str, _body: dict[str, Any]) -> Any:
        return next(failures, {"task_alive": True})

    client = FakeServer(handler).client(wait=waits.append)
    assert client.update_task(RUN_ID, 0, STATS).alive is True
    assert waits == [15.0, 15.0]


def test_update_task_gives_up_after_five_attempts() -> None:
    server = FakeServer(lambda _p, _b: httpx.ReadTimeout("slow"))
    with pytest.raises(TransportError, match="ReadTimeout"):
        server.client().update_task(RUN_ID, 0, STATS)
    assert len(server.calls) == UPDATE_ATTEMPTS


def test_update_task_error_and_dead_task() -> None:
    server = FakeServer(lambda _p, _b: {"task_alive": False, "error": "incompatible stats"})
    with pytest.raises(ServerError, match="incompatible stats"):
        server.client().update_task(RUN_ID, 0, STATS)
    finished = FakeServer(lambda _p, _b: {"task_alive": False})
    assert finished.client().update_task(RUN_ID, 0, STATS).alive is False


def test_replies_that_are_not_json_objects() -> None:
    for reply in (httpx.Response(502, text=""), httpx.Response(200, json=[1, 2])):
        server = FakeServer(lambda _p, _b, r=reply: r)  # type: ignore[misc]
        with pytest.raises(TransportError, match="not a JSON object"):
            server.client().request_task()


def test_contact_clock_and_beat() -> None:
    now = [100.0]
    server = FakeServer(lambda _p, _b: {"task_alive": False, "info": "task is not active"})
    client = server.client(clock=lambda: now[0])
    now[0] = 250.0
    assert client.beat(RUN_ID, 1) is False
    assert client.last_contact == 250.0


def test_downloads() -> None:
    server = FakeServer()
    server.files["/api/book/a.epd"] = b"data"
    client = server.client()
    assert client.get("/api/book/a.epd") == b"data"
    with pytest.raises(NotFoundError):
        client.get("/api/nn/nn-000000000000.nnue")


def temporary(status: int = 503, retry_after: str = "5") -> httpx.Response:
    """A temporary refusal as the server sends it: a JSON string, with Retry-After."""
    return httpx.Response(status, json="/api/x: busy", headers={"retry-after": retry_after})


@pytest.mark.parametrize("status", [429, 503])
def test_a_429_or_503_is_a_refusal_for_now_with_its_wait(status: int) -> None:
    for reply in (temporary(status, "7"), httpx.Response(status, json={"error": "old shape"})):
        server = FakeServer(lambda _p, _b, r=reply: r)  # type: ignore[misc]
        with pytest.raises(TemporaryRefusalError) as refused:
            server.client().request_version()
        assert refused.value.retry_after == (7.0 if "retry-after" in reply.headers else 1.0)


def test_a_retry_after_is_kept_within_bounds() -> None:
    for header, seconds in (("0", 1.0), ("100000", 120.0), ("nan", 1.0), ("soon", 1.0)):
        server = FakeServer(lambda _p, _b, h=header: temporary(retry_after=h))  # type: ignore[misc]
        with pytest.raises(TemporaryRefusalError) as refused:
            server.client().request_task()
        assert refused.value.retry_after == seconds


def test_an_update_waits_out_refusals_for_now_without_using_its_attempts() -> None:
    replies = iter([temporary()] * (UPDATE_ATTEMPTS + 2))
    waits: list[float] = []
    server = FakeServer(lambda _p, _b: next(replies, {"task_alive": True}))
    assert server.client(wait=waits.append).update_task(RUN_ID, 0, STATS).alive is True
    assert len(server.calls) == UPDATE_ATTEMPTS + 3
    assert all(5.0 <= wait <= 7.5 for wait in waits)  # Retry-After, and up to half more


def test_refusals_for_now_end_once_the_patience_is_spent() -> None:
    now = [0.0]

    def wait(seconds: float) -> None:
        now[0] += seconds

    server = FakeServer(lambda _p, _b: temporary(retry_after="60"))
    client = server.client(wait=wait, clock=lambda: now[0])
    with pytest.raises(TemporaryRefusalError):
        client.failed_task(RUN_ID, 0, "broken")
    assert TEMPORARY_PATIENCE - 90 <= now[0] <= TEMPORARY_PATIENCE
    assert len(server.calls) > 1


def test_every_task_report_and_closing_outlasts_a_refusal_for_now() -> None:
    for call in ("update_task", "request_spsa", "failed_task", "stop_run", "upload_pgn"):
        replies = iter([temporary(), temporary(429)])
        fine = {"task_alive": True, "w_params": [], "b_params": []}
        server = FakeServer(lambda _p, _b, r=replies, f=fine: next(r, f))  # type: ignore[misc]
        client = server.client()
        if call == "update_task":
            client.update_task(RUN_ID, 0, STATS)
        elif call == "request_spsa":
            client.request_spsa(RUN_ID, 0)
        elif call == "upload_pgn":
            client.upload_pgn(RUN_ID, 0, "H4sI")
        else:
            getattr(client, call)(RUN_ID, 0, "why")
        assert len(server.calls) == 3, call


def test_an_update_brings_the_runs_llr_when_the_server_says_it() -> None:
    for reply, llr in (
        ({"task_alive": True, "llr": 1.25}, 1.25),
        ({"task_alive": True, "llr": 2}, 2.0),
        ({"task_alive": True}, None),  # no SPRT, or the reference's server
        ({"task_alive": True, "llr": "high"}, None),
        ({"task_alive": True, "llr": True}, None),
    ):
        server = FakeServer(lambda _p, _b, r=reply: r)  # type: ignore[misc]
        assert server.client().update_task(RUN_ID, 0, STATS) == Reported(True, llr)
