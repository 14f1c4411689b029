"""Who a request is, through the real app on both backends: a worker's name in
any case counts as its account's (machine limit, task ownership, blocks); a
worker token is made only with the current password; a password change ends
the other sessions and, unless unticked, revokes every worker token."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from arbiter.domain.workers import WorkerBlocks
from tests.domain.runs.support import pairs
from tests.web.api_support import (
    api_with_users,
    approved,
    post,
    take_task,
    user,
    wire,
    worker_body,
)
from tests.web.support import STRONG_PASSWORD, csrf_of, log_in, state

NEW_PASSWORD = "another quite long passphrase 4242"


@pytest.fixture
def api(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    with api_with_users(tmp_path, database_url, monkeypatch) as client:
        yield client


# ---------------------------------------------------------------- worker names


def test_the_machine_limit_holds_whatever_the_case(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=60000)
    limit = user(api, "alice").machine_limit
    for index in range(limit):
        take_task(api, ("alice", "ALICE", "Alice")[index % 3], key=f"m{index:02d}")
    status, reply = post(api, "/api/request_task", worker_body("ALICE", "m99"))
    assert (status, reply.get("error")) == (200, "Machine limit reached for user alice.")
    # Counted, stored and shown under the account's own spelling.
    tasks = state(api).runs.context.registry.get(run_id)
    assert tasks is not None
    assert {(task.username, task.worker_name[:6]) for task in tasks.tasks} == {("alice", "alice-")}


def test_a_task_is_its_accounts_in_any_case(api: TestClient, repo_url: str) -> None:
    approved(api, repo_url, num_games=2000)
    reply = take_task(api, "ALICE")
    body = worker_body(
        "alice", run_id=reply["run"]["_id"], task_id=reply["task_id"], stats=wire(pairs(dd=1))
    )
    status, answer = post(api, "/api/update_task", body)
    assert (status, answer["task_alive"]) == (200, True)


def test_a_blocked_machine_is_blocked_in_any_case(api: TestClient, repo_url: str) -> None:
    approved(api, repo_url, num_games=2000)
    changed = state(api).runs.blocked_machines.forget
    WorkerBlocks(state(api).storage, changed).set_blocked(
        user(api, "root"), "alice-4cores-abcd", blocked=True, message="bad results"
    )
    status, reply = post(api, "/api/request_task", worker_body("ALICE"))
    assert status == 200
    assert "has been blocked: bad results" in reply["error"]


# ---------------------------------------------------------------- the profile page


def make_token(client: TestClient, password: str) -> Any:
    form = {"label": "box", "current_password": password, "csrf_token": csrf_of(client, "/user")}
    return client.post("/user/tokens", data=form)


def test_a_token_needs_the_current_password(api: TestClient) -> None:
    log_in(api, "alice")
    for password in ("", "not the password at all 0000"):
        refused = make_token(api, password)
        assert refused.status_code == 400
        assert (
            '<small class="error" id="current_password-error">'
            "The current password is wrong.</small>" in refused.text
        )
    assert state(api).accounts.list_tokens("alice") == []
    made = make_token(api, STRONG_PASSWORD)
    assert made.status_code == 200
    assert "shown only once" in made.text
    assert [token.label for token in state(api).accounts.list_tokens("alice")] == ["box"]


def change_password(client: TestClient, *, revoke: bool) -> Any:
    form = {
        "old_password": STRONG_PASSWORD,
        "new_password": NEW_PASSWORD,
        "new_password2": NEW_PASSWORD,
        "csrf_token": csrf_of(client, "/user"),
    }
    if revoke:
        form["revoke_tokens"] = "on"
    return client.post("/user/password", data=form, follow_redirects=False)


def test_the_revoke_box_is_ticked_by_default(api: TestClient) -> None:
    log_in(api, "alice")
    assert '<input type="checkbox" name="revoke_tokens" checked>' in api.get("/user").text


def test_a_password_change_ends_other_sessions_and_revokes_tokens(api: TestClient) -> None:
    token = state(api).accounts.create_token("alice", "stolen")
    log_in(api, "alice")
    other = TestClient(api.app, base_url="http://testserver")
    log_in(other, "alice")
    assert change_password(api, revoke=True).status_code == 303
    assert api.get("/user", follow_redirects=False).status_code == 200
    assert other.get("/user", follow_redirects=False).status_code == 302
    assert all(info.revoked for info in state(api).accounts.list_tokens("alice"))
    status, _ = post(
        api, "/api/request_version", {"password": token, "worker_info": {"username": "alice"}}
    )
    assert status == 401


def test_a_password_change_keeps_tokens_when_unticked(api: TestClient) -> None:
    token = state(api).accounts.create_token("alice", "box")
    log_in(api, "alice")
    assert change_password(api, revoke=False).status_code == 303
    assert not state(api).accounts.list_tokens("alice")[0].revoked
    status, _ = post(
        api, "/api/request_version", {"password": token, "worker_info": {"username": "alice"}}
    )
    assert status == 200
