"""While the database is away, the API answers a JSON 503 that workers retry."""

import pytest
from starlette.testclient import TestClient

from arbiter.storage import StorageUnavailable


def test_database_away_is_a_json_503(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(*_args: object) -> None:
        raise StorageUnavailable("connection refused")

    accounts = client.app.state.arbiter.accounts  # type: ignore[attr-defined]
    monkeypatch.setattr(accounts, "authenticate_worker", unavailable)
    body = {"password": "x", "worker_info": {"username": "alice"}}
    reply = client.post("/api/request_version", json=body)
    assert reply.status_code == 503
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == "/api/request_version: database unavailable, retry shortly"
    assert reply.headers["retry-after"] == "5"
