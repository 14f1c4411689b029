"""Password guessing through the real app, on both backends: the login form and
the worker API's password path answer 429 with Retry-After once an account or
an address has failed too often, worker tokens pass regardless, signups are
limited per address, and a full argon2 gate is a quick 503."""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.web.api_support import (
    actions,
    add_user,
    api_client,
    api_settings,
)
from tests.web.support import STRONG_PASSWORD, csrf_of, signup_form, state

LIMITS = {
    "password_account_free_failures": 2,
    "password_address_free_failures": 4,
    "signups_per_address_per_hour": 2,
}
WRONG = "not the password at all 0000"


def app(tmp_path: Path, database_url: str, mp: pytest.MonkeyPatch, **changes: Any) -> Any:
    return api_client(api_settings(tmp_path, database_url, **{**LIMITS, **changes}), mp)


@pytest.fixture
def client(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    with app(tmp_path, database_url, monkeypatch) as test_client:
        add_user(test_client, "alice")
        yield test_client


def from_address(client: TestClient, address: str) -> TestClient:
    """Another client of the same running app, seen from `address`."""
    return TestClient(client.app, base_url="http://testserver", client=(address, 40000))


def log_in(client: TestClient, name: str, password: str) -> Any:
    form = {"username": name, "password": password, "csrf_token": csrf_of(client)}
    return client.post("/login", data=form, follow_redirects=False)


def version(client: TestClient, name: str, password: str) -> tuple[int, dict[str, Any], Any]:
    body = {"password": password, "worker_info": {"username": name}}
    reply = client.post("/api/request_version", json=body)
    return reply.status_code, reply.json(), reply.headers


def test_the_login_form_throttles_beside_the_password_field(client: TestClient) -> None:
    for _ in range(3):  # two free failures, the third starts a 1 s wait
        assert log_in(client, "alice", WRONG).status_code == 401
    refused = log_in(client, "alice", STRONG_PASSWORD)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert (
        '<small class="error" id="password-error">'
        "Too many failed attempts. Try again in 1 s.</small>" in refused.text
    )
    logged = [a["message"] for a in actions(client) if a["action"] == "system_event"]
    assert logged == ["password attempts throttled: account alice, 3 failures, next attempt in 1 s"]
    time.sleep(1.0)  # the wait is over: the right password gets in
    assert log_in(client, "alice", STRONG_PASSWORD).status_code == 303


def test_a_refused_login_is_answered_before_any_database_or_argon2_work(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Throttled or busy, a guess is refused on the event loop: a flood of them
    takes no threadpool thread and reads nothing."""
    with app(tmp_path, database_url, monkeypatch, argon2_concurrency=1, argon2_waiting=0) as api:
        add_user(api, "alice")
        accounts = state(api).accounts
        calls: list[str] = []
        authenticate = accounts.authenticate

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(args[0])
            return authenticate(*args, **kwargs)

        monkeypatch.setattr(accounts, "authenticate", counted)
        for _ in range(3):
            assert log_in(api, "alice", WRONG).status_code == 401
        assert log_in(api, "alice", STRONG_PASSWORD).status_code == 429
        with accounts.guard.gate.slot():  # the gate's one place taken
            assert log_in(from_address(api, "198.51.100.9"), "bob", WRONG).status_code == 503
        assert calls == ["alice"] * 3


def test_guesses_make_an_account_wait_only_for_their_address(client: TestClient) -> None:
    """Guessing slows the guesser, never the owner: the right password from
    another address logs in, and the owner's workers go on."""
    for _ in range(3):
        assert log_in(client, "alice", WRONG).status_code == 401
    assert log_in(client, "alice", STRONG_PASSWORD).status_code == 429
    assert version(client, "alice", STRONG_PASSWORD)[0] == 429
    elsewhere = from_address(client, "198.51.100.9")
    assert log_in(elsewhere, "ALICE", STRONG_PASSWORD).status_code == 303
    assert version(elsewhere, "alice", STRONG_PASSWORD)[0] == 200


def test_an_address_is_throttled_whatever_the_names(client: TestClient) -> None:
    for name in ("n1", "n2", "n3", "n4", "n5"):
        assert log_in(client, name, WRONG).status_code == 401
    assert log_in(client, "alice", STRONG_PASSWORD).status_code == 429
    elsewhere = from_address(client, "198.51.100.9")
    assert log_in(elsewhere, "alice", STRONG_PASSWORD).status_code == 303


def test_the_worker_password_path_answers_a_json_429(client: TestClient) -> None:
    token = state(client).accounts.create_token("alice", "box")
    for _ in range(3):
        assert version(client, "alice", WRONG)[0] == 401
    status, reply, headers = version(client, "alice", STRONG_PASSWORD)
    assert (status, headers["retry-after"]) == (429, "1")
    # A JSON string, not an object with `error`: the official worker retries it.
    assert reply == "/api/request_version: Too many failed attempts. Try again in 1 s."
    # A token is checked by its SHA-256, no guess at the password: never throttled.
    assert version(client, "alice", token)[0] == 200


def test_unknown_names_and_wrong_passwords_are_answered_alike(client: TestClient) -> None:
    replies = [version(client, name, WRONG) for name in ("alice", "nobody")]
    assert [status for status, _, _ in replies] == [401, 401]
    assert replies[0][1]["error"] == replies[1][1]["error"]
    for _ in range(2):
        version(client, "nobody", WRONG)
    assert version(client, "nobody", WRONG)[0] == 429  # unknown names are throttled too


def test_signups_are_limited_per_address(client: TestClient) -> None:
    def signup(name: str, on: TestClient = client) -> Any:
        form = signup_form(
            on,
            username=name,
            email=f"{name}@example.org",
            password=STRONG_PASSWORD,
            password2=STRONG_PASSWORD,
        )
        return on.post("/signup", data=form, follow_redirects=False)

    assert signup("bob").status_code == 303
    assert signup("carol").status_code == 303
    refused = signup("dave")
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "3600"
    assert "Too many signups from your address. Try again in 3600 s." in refused.text
    assert state(client).accounts.get_user("dave") is None
    assert signup("dave", from_address(client, "198.51.100.9")).status_code == 303


def test_a_full_argon2_gate_is_a_quick_503(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with app(tmp_path, database_url, monkeypatch, argon2_concurrency=1, argon2_waiting=0) as api:
        add_user(api, "alice")
        with state(api).accounts.guard.gate.slot():  # every slot taken
            status, reply, _ = version(api, "alice", STRONG_PASSWORD)
            page = log_in(api, "alice", STRONG_PASSWORD)
        assert status == 503
        assert reply == "/api/request_version: Too many password checks at once; retry shortly."
        assert (page.status_code, page.headers["retry-after"]) == (503, "1")
        assert version(api, "alice", STRONG_PASSWORD)[0] == 200  # free again
