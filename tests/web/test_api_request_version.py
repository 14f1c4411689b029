"""POST /api/request_version: the credential check every worker starts with."""

from typing import Any

import pytest
from starlette.testclient import TestClient

from arbiter.protocol import WORKER_VERSION
from tests.web.support import STRONG_PASSWORD, make_user, state

PATH = "/api/request_version"


def body(username: str = "alice", password: str = STRONG_PASSWORD) -> dict[str, Any]:
    return {"password": password, "worker_info": {"username": username}}


def test_returns_version_and_duration(client: TestClient) -> None:
    make_user(client)
    reply = client.post(PATH, json=body())
    assert reply.status_code == 200
    payload = reply.json()
    assert payload["version"] == WORKER_VERSION
    assert isinstance(payload["duration"], float)
    assert set(payload) == {"version", "duration"}


def test_worker_token_works_as_password(client: TestClient) -> None:
    make_user(client)
    token = state(client).accounts.create_token("alice", "box1")
    assert client.post(PATH, json=body(password=token)).status_code == 200


@pytest.mark.parametrize(
    ("username", "password"), [("alice", "wrong password"), ("nobody", STRONG_PASSWORD)]
)
def test_unknown_user_and_wrong_password_look_the_same(
    client: TestClient, username: str, password: str
) -> None:
    make_user(client)
    reply = client.post(PATH, json=body(username, password))
    assert reply.status_code == 401
    assert reply.json()["error"] == f"{PATH}: Invalid username or password."
    assert "duration" in reply.json()


def test_pending_account_has_its_own_message(client: TestClient) -> None:
    state(client).accounts.signup("bob", STRONG_PASSWORD, "bob@example.org")
    reply = client.post(PATH, json=body("bob"))
    assert reply.status_code == 401
    assert reply.json()["error"] == f"{PATH}: Your account is pending approval."


def test_blocked_account_has_its_own_message(client: TestClient) -> None:
    make_user(client, "root", approver=True)
    make_user(client)
    state(client).accounts.set_blocked("root", "alice", True)
    reply = client.post(PATH, json=body())
    assert reply.status_code == 401
    assert reply.json()["error"] == f"{PATH}: Your account is blocked."


def test_malformed_json_is_a_400_naming_the_problem(client: TestClient) -> None:
    reply = client.post(PATH, content=b"{not json", headers={"content-type": "application/json"})
    assert reply.status_code == 400
    assert reply.json()["error"].startswith(f"{PATH}: request is not json encoded")


def test_body_must_be_an_object(client: TestClient) -> None:
    reply = client.post(PATH, json=[1, 2])
    assert reply.status_code == 400
    assert "JSON object" in reply.json()["error"]


def test_wrong_type_names_the_field(client: TestClient) -> None:
    reply = client.post(PATH, json={"password": 12, "worker_info": {"username": "alice"}})
    assert reply.status_code == 400
    assert reply.json()["error"].startswith(f"{PATH}: password:")


def test_missing_field_is_named(client: TestClient) -> None:
    reply = client.post(PATH, json={"password": "x"})
    assert reply.status_code == 400
    assert reply.json()["error"] == f"{PATH}: worker_info: missing required field"


def test_invalid_username_is_refused(client: TestClient) -> None:
    reply = client.post(PATH, json=body(username="a b"))
    assert reply.status_code == 400
    assert "worker_info.username" in reply.json()["error"]


def test_deep_nesting_is_refused(client: TestClient) -> None:
    nested = b'{"password": "x", "worker_info": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    reply = client.post(PATH, content=nested, headers={"content-type": "application/json"})
    assert reply.status_code == 400


def test_oversized_body_is_413(client: TestClient) -> None:
    reply = client.post(
        PATH, content=b" " * (3 * 1024 * 1024), headers={"content-type": "application/json"}
    )
    assert reply.status_code == 413
    assert reply.json()["error"].startswith(f"{PATH}: request body larger than")


def test_get_is_not_allowed(client: TestClient) -> None:
    reply = client.get(PATH)
    assert reply.status_code == 405
    assert reply.json()["error"].startswith(PATH)


def test_rejected_request_writes_nothing(client: TestClient) -> None:
    make_user(client)
    before = state(client).actions.list(_all_actions())
    client.post(PATH, json=body(password="wrong"))
    client.post(PATH, content=b"{", headers={"content-type": "application/json"})
    assert state(client).actions.list(_all_actions()) == before


def _all_actions() -> Any:
    from arbiter.storage.base import ActionFilter

    return ActionFilter()
