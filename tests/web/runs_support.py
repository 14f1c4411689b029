"""Helpers for page tests about runs: users, runs with results, the new test form."""

from typing import Any

from starlette.testclient import TestClient

from arbiter.domain.accounts import User
from arbiter.web.ui.submission import blank_values
from tests.domain.runs.support import pairs, worker
from tests.web.support import csrf_of, make_user, state


def users(client: TestClient) -> tuple[User, User]:
    """alice (a tester) and root (an approver)."""
    return make_user(client, "alice"), make_user(client, "root", approver=True)


def submit(client: TestClient, owner: User, repo_url: str, **args: Any) -> str:
    body = {"tests_repo": repo_url, "new_tag": "patch", "base_tag": "master", **args}
    return state(client).runs.lifecycle.submit(owner, body)


def play(client: TestClient, run_id: str, user: User, *, key: str = "abcd", dd: int = 8) -> int:
    """A worker of `user` takes a task of the (only) approved run and reports results."""
    runs = state(client).runs
    info = worker(user.username, key=key)
    reply = runs.scheduler.request_task(info, user, "10.0.0.1")
    assert reply.get("run", {}).get("_id") == run_id, reply
    runs.ingest.update_task(info, run_id, reply["task_id"], pairs(ld=3, dd=dd, wd=4, ww=1))
    return int(reply["task_id"])


def new_run_form(client: TestClient, repo_url: str, **overrides: str) -> dict[str, str]:
    """A complete, valid new test form as a browser posts it (checkboxes unticked)."""
    values = {
        key: value for key, value in blank_values(repo_url).items() if not isinstance(value, bool)
    }
    values.update(new_tag="patch", csrf_token=csrf_of(client, "/tests/run"))
    values.update(overrides)
    return values
