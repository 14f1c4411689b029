"""Every temporary refusal of a worker call, on both backends, is one the
official worker retries (tests/web/official_replies.py holds its code's
decisions): overload, a full argon2 gate, throttling, shutdown, a secondary
(or a primary without its lease: the same refusal), the database away. Final
refusals (a wrong password, an unknown task) stay final."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from arbiter.protocol import WORKER_PATHS
from arbiter.protocol.workers import short_worker_name
from arbiter.runtime.settings import OVERLOAD_LAG_MS
from arbiter.storage import StorageUnavailable
from arbiter.storage.records import QuarantineRecord
from arbiter.web.overload import LAG_LIMIT, NEVER_SHED
from tests.web.api_support import api_client, api_settings, api_with_users, worker_body
from tests.web.official_replies import Outcome, outcome
from tests.web.support import STRONG_PASSWORD, state

WRONG = "not the password at all 0000"
STATS = {"wins": 0, "losses": 0, "draws": 0, "crashes": 0, "time_losses": 0}
CALLED = ("/api/request_version", "/api/update_task", "/api/beat", "/api/failed_task")


@pytest.fixture
def client(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    with api_with_users(
        tmp_path,
        database_url,
        monkeypatch,
        overload_lag_ms=OVERLOAD_LAG_MS,
        password_account_free_failures=2,
        argon2_concurrency=1,
        argon2_waiting=0,
    ) as test_client:
        yield test_client


def call(client: TestClient, path: str, password: str = STRONG_PASSWORD) -> tuple[int, Outcome]:
    body = worker_body(
        password=password,
        run_id="0" * 24,
        task_id=0,
        message="m",
        stats={**STATS, "pentanomial": [0, 0, 0, 0, 0]},
    )
    reply = client.post(path, json=body)
    assert reply.headers["content-type"] == "application/json"
    if reply.status_code in (429, 503):
        assert int(reply.headers["retry-after"]) >= 1
    return reply.status_code, outcome(path, reply.content)


def test_an_overloaded_server_is_retried(client: TestClient) -> None:
    client.app.state.loop_lag.observe(LAG_LIMIT * 2)  # type: ignore[attr-defined]
    for path in set(WORKER_PATHS) - NEVER_SHED:
        status, taken = call(client, path)
        assert taken is not Outcome.FINAL, (path, status)


def test_a_full_argon2_gate_is_retried(client: TestClient) -> None:
    with state(client).accounts.guard.gate.slot():  # the gate's only place taken
        for path in CALLED:
            assert call(client, path) == (503, Outcome.RETRIED), path


def test_throttling_is_retried_and_a_wrong_password_is_final(client: TestClient) -> None:
    assert call(client, "/api/request_version", WRONG) == (401, Outcome.FINAL)
    while call(client, "/api/request_version", WRONG)[0] != 429:
        pass
    for path in CALLED:
        assert call(client, path) == (429, Outcome.RETRIED), path


def test_shutting_down_is_retried(client: TestClient) -> None:
    state(client).shutting_down = True
    try:
        for path in WORKER_PATHS:
            assert call(client, path) == (
                503,
                Outcome.RETRIED if path not in NEVER_SHED else Outcome.FINAL,
            ), path
    finally:
        state(client).shutting_down = False


def test_a_secondary_is_retried(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = api_settings(tmp_path, database_url, role="secondary")
    with api_client(settings, monkeypatch) as secondary:
        for path in set(WORKER_PATHS) - {"/api/upload_pgn", "/api/request_spsa"}:
            assert call(secondary, path) == (503, Outcome.RETRIED), path


def test_the_database_away_is_retried(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(*_args: Any) -> None:
        raise StorageUnavailable("connection refused")

    monkeypatch.setattr(state(client).accounts, "authenticate_worker", unavailable)
    for path in CALLED:
        assert call(client, path) == (503, Outcome.RETRIED), path


def test_final_refusals_stay_final(client: TestClient) -> None:
    assert call(client, "/api/update_task")[1] is Outcome.FINAL  # no such task


def test_a_quarantined_machine_waits_for_its_release(client: TestClient) -> None:
    """The official worker, refused for a quarantine, waits and asks again: an
    approver's release puts it back to work without anyone touching it."""
    info = worker_body()["worker_info"]
    name = short_worker_name(info["username"], info["concurrency"], info["unique_key"])
    finding = {"run_id": "0" * 24, "author": "carol", "kind": "crashes", "detail": "12 crashes"}
    with state(client).storage.write() as tx:
        tx.quarantine.put(QuarantineRecord(name, True, 1.0, [finding] * 3, []))
    state(client).runs.blocked_machines.forget()
    reply = client.post("/api/request_task", json=worker_body())
    assert "quarantined by the health check (crashes on 1 run)" in reply.json()["error"]
    assert outcome("/api/request_task", reply.content) is Outcome.RETRIED
