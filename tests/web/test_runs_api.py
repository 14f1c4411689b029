"""The runs API end to end in-process, on both backends: scripting with a bearer
token (submit, approve, stop, modify, purge, delete) and the read-only
endpoints of reference 1.3 (active and finished runs, one run with why it gets
no workers, one task, its Elo; the audit log is in test_actions_api.py).

Every refusal is checked to change nothing (`unchanged`).
"""

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from arbiter.domain.runs.documents import new_run_id
from arbiter.domain.runs.ranking import ARCH, NOT_APPROVED, TOO_MANY_THREADS
from arbiter.storage.records import evolve
from tests.domain.runs.support import pairs
from tests.web.api_support import (
    actions,
    add_user,
    api_with_users,
    approved,
    post,
    stored_run,
    stored_task,
    submit,
    take_task,
    unchanged,
    user,
    wire,
    worker_body,
)
from tests.web.support import state

SHA = re.compile(r"[0-9a-f]{40}")
NO_RUN = "0" * 24
CORS = "access-control-allow-origin"
SPSA = {"A": 0.1, "alpha": 0.602, "gamma": 0.101, "raw_params": "Tempo,20,0,50,5,0.002"}


@pytest.fixture
def api(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app on each backend with alice (a tester), root (an approver) and bob."""
    with api_with_users(tmp_path, database_url, monkeypatch, "bob") as client:
        yield client


@pytest.fixture
def lite(
    tmp_path: Path, sqlite_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    """The same on SQLite only: for refusals decided before storage matters."""
    with api_with_users(tmp_path, sqlite_database_url, monkeypatch, "bob") as client:
        yield client


def bearer(client: TestClient, username: str) -> dict[str, str]:
    return {"authorization": f"Bearer {state(client).accounts.create_token(username)}"}


def call(
    client: TestClient, path: str, username: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    """POST with `username`'s bearer token; (status, reply) with `duration` checked."""
    reply = client.post(path, json=body, headers=bearer(client, username))
    payload: dict[str, Any] = reply.json()
    assert isinstance(payload.get("duration"), float), payload
    return reply.status_code, payload


def get(client: TestClient, path: str, **params: Any) -> Any:
    reply = client.get(path, params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()


def new_run(repo_url: str, **args: Any) -> dict[str, Any]:
    return {"tests_repo": repo_url, "base_tag": "master", "new_tag": "patch", **args}


# ---------------------------------------------------------------- submitting


@pytest.mark.parametrize("kind", ["sprt", "spsa", "fixed", "nodes"])
def test_a_valid_submission_stores_an_unapproved_run(
    api: TestClient, repo_url: str, kind: str
) -> None:
    kinds: dict[str, dict[str, Any]] = {
        "sprt": {"sprt": {"elo0": 0, "elo1": 2}},
        "spsa": {"spsa": SPSA, "num_games": 20000},
        "fixed": {"num_games": 1000, "tc": "60+0.6", "threads": 2, "info": "fixed games"},
        "nodes": {"num_games": 2000, "tc": "N=25000"},
    }
    args = kinds[kind]
    status, reply = call(api, "/api/runs", "alice", new_run(repo_url, **args))
    assert status == 200
    assert set(reply) == {"run_id", "duration"}
    view = get(api, f"/api/get_run/{reply['run_id']}")
    assert (view["approved"], view["finished"], view["args"]["username"]) == (False, False, "alice")
    assert SHA.fullmatch(view["args"]["resolved_new"])
    assert SHA.fullmatch(view["args"]["resolved_base"])
    assert view["args"]["resolved_new"] != view["args"]["resolved_base"]
    if kind == "sprt":
        sprt = view["args"]["sprt"]
        assert (sprt["elo0"], sprt["elo1"], sprt["state"], sprt["batch_size"]) == (0, 2, "", 16)
        assert view["args"]["num_games"] == 800_000  # an SPRT's cap when none is given
    elif kind == "spsa":
        spsa = view["args"]["spsa"]
        assert (spsa["num_iter"], spsa["iter"], len(spsa["params"])) == (10000, 0, 1)
    else:
        assert "sprt" not in view["args"]
        assert "spsa" not in view["args"]
    logged = actions(api)[0]
    assert (logged["action"], logged["username"], logged["run_id"]) == (
        "new_run",
        "alice",
        reply["run_id"],
    )


INVALID = [
    ({"tc": "10 + 0.1"}, "tc"),
    ({"new_tc": "1+"}, "new_tc"),
    ({"num_games": 3}, "num_games"),
    ({"num_games": 4_000_000}, "num_games"),
    ({"threads": "two"}, "threads"),
    ({"threads": 0}, "threads"),
    ({"tests_repo": "ext::sh -c touch% /tmp/x"}, "tests_repo"),
    ({"new_tag": "no-such-branch"}, "new_tag"),
    ({"base_tag": "a..b"}, "base_tag"),
    ({"book": "../etc/passwd.epd"}, "book"),
    ({"book": "missing.epd"}, "book"),
    ({"new_options": "Hash"}, "new_options"),
    ({"priority": "high"}, "priority"),
    ({"throughput": 1000}, "throughput"),
    ({"auto_purge": "maybe"}, "auto_purge"),
    ({"compiler": "icc"}, "compiler"),
    ({"arch_filter": "^sparc"}, "arch_filter"),
    ({"new_signature": "12a"}, "new_signature"),
    ({"sprt": {"elo0": 2, "elo1": 0}}, "sprt.elo1"),
    ({"sprt": {"elo0": 0, "elo1": 2, "elo_model": "Glicko"}}, "sprt.elo_model"),
    ({"sprt": {"elo0": 0, "elo1": 2, "alpha": 0.7}}, "sprt.alpha"),
    ({"sprt": 5}, "sprt"),
    ({"sprt": {"elo0": 0, "elo1": 2, "batch_size": 0}}, "sprt.batch_size"),
    ({"spsa": {**SPSA, "raw_params": "Tempo,20,0"}, "num_games": 2000}, "spsa.raw_params"),
    ({"spsa": SPSA, "num_games": 1500}, "num_games"),
    ({"spsa": SPSA, "sprt": {"elo0": 0, "elo1": 2}}, "spsa"),
]


@pytest.mark.parametrize(("args", "field"), INVALID, ids=[f for _, f in INVALID])
def test_an_invalid_argument_is_400_naming_the_field(
    lite: TestClient, repo_url: str, args: dict[str, Any], field: str
) -> None:
    headers = bearer(lite, "alice")
    with unchanged(lite):
        reply = lite.post("/api/runs", json=new_run(repo_url, **args), headers=headers)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"].startswith(f"/api/runs: {field}: "), reply.json()


def test_an_sprt_batch_size_is_kept_and_tasks_hold_whole_batches(
    api: TestClient, repo_url: str
) -> None:
    """A short test may report every few pairs; the reference's formula stays the default."""
    sprt = {"elo0": 0, "elo1": 2, "batch_size": 3}
    status, reply = call(api, "/api/runs", "alice", new_run(repo_url, sprt=sprt))
    assert status == 200, reply
    run_id = reply["run_id"]
    assert stored_run(api, run_id).args.sprt["batch_size"] == 3
    state(api).runs.lifecycle.approve(user(api, "root"), run_id)
    task = take_task(api)
    assert task["run"]["args"]["sprt"]["batch_size"] == 3
    assert task["run"]["my_task"]["num_games"] % 6 == 0
    body = worker_body(run_id=run_id, task_id=task["task_id"], stats=wire(pairs(dd=3)))
    assert post(api, "/api/update_task", body)[1]["task_alive"] is True
    assert stored_run(api, run_id).args.sprt["overshoot"]["last_update"] == 3


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (0, "must be between 1 and 1,000, got 0"),
        (-4, "must be between 1 and 1,000, got -4"),
        (1001, "must be between 1 and 1,000, got 1,001"),
        (2.5, "must be a whole number"),
        ("lots", "must be a whole number"),
        (True, "must be a whole number"),
        (600, "600 game pairs is more than num_games (1,000 games) allows"),
    ],
)
def test_a_bad_sprt_batch_size_is_400_and_stores_nothing(
    api: TestClient, repo_url: str, batch: Any, message: str
) -> None:
    sprt = {"elo0": 0, "elo1": 2, "batch_size": batch}
    with unchanged(api):
        status, reply = call(
            api, "/api/runs", "alice", new_run(repo_url, sprt=sprt, num_games=1000)
        )
    assert status == 400
    assert reply["error"] == f"/api/runs: sprt.batch_size: {message}"


@pytest.mark.parametrize("field", ["tests_repo", "new_tag"])
def test_a_missing_argument_is_400_naming_the_field(
    lite: TestClient, repo_url: str, field: str
) -> None:
    body = new_run(repo_url)
    del body[field]
    headers = bearer(lite, "alice")
    with unchanged(lite):
        reply = lite.post("/api/runs", json=body, headers=headers)
    assert reply.status_code == 400
    assert reply.json()["error"].startswith(f"/api/runs: {field}: is required")


def test_an_unknown_argument_is_400_naming_it(lite: TestClient, repo_url: str) -> None:
    """A misspelt key would otherwise leave its argument at the default (60000 games)."""
    headers = bearer(lite, "alice")
    with unchanged(lite):
        reply = lite.post("/api/runs", json=new_run(repo_url, num_game=2000), headers=headers)
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("/api/runs: num_game: not a run argument (allowed: ")


def test_a_body_that_is_no_object_is_400(lite: TestClient) -> None:
    headers = bearer(lite, "alice")
    with unchanged(lite):
        reply = lite.post("/api/runs", json=["patch"], headers=headers)
    assert reply.status_code == 400
    assert reply.json()["error"] == "/api/runs: request body must be a JSON object"


def revoked(client: TestClient) -> str:
    token = state(client).accounts.create_token("alice")
    token_id = state(client).accounts.list_tokens("alice")[0].id
    state(client).accounts.revoke_token("alice", token_id)
    return f"Bearer {token}"


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "send a worker token: Authorization: Bearer <token>"),
        ("Basic YWxpY2U6eA==", "send a worker token: Authorization: Bearer <token>"),
        ("Bearer ", "send a worker token: Authorization: Bearer <token>"),
        ("Bearer arb_not-a-token", "Invalid or revoked token."),
        ("Bearer correct horse battery staple 1729", "Invalid or revoked token."),
        (revoked, "Invalid or revoked token."),
    ],
    ids=["none", "basic", "empty", "unknown", "password", "revoked"],
)
@pytest.mark.parametrize("path", ["/api/runs", f"/api/runs/{NO_RUN}/approve"])
def test_a_bad_bearer_token_is_401(
    lite: TestClient, repo_url: str, path: str, authorization: Any, message: str
) -> None:
    header = authorization(lite) if callable(authorization) else authorization
    headers = {} if header is None else {"authorization": header}
    with unchanged(lite):
        reply = lite.post(path, json=new_run(repo_url), headers=headers)
    assert reply.status_code == 401
    assert reply.json() == {"error": f"{path}: {message}", "duration": reply.json()["duration"]}


def test_a_blocked_users_token_is_401(api: TestClient, repo_url: str) -> None:
    headers = bearer(api, "alice")
    state(api).accounts.set_blocked("root", "alice", True)
    with unchanged(api):
        reply = api.post("/api/runs", json=new_run(repo_url), headers=headers)
    assert reply.status_code == 401
    assert reply.json()["error"] == "/api/runs: Your account is blocked."


# ---------------------------------------------------------------- approve, stop


def test_an_approver_approves_someone_elses_run(api: TestClient, repo_url: str) -> None:
    run_id = submit(api, "alice", repo_url)
    status, reply = call(api, f"/api/runs/{run_id}/approve", "root")
    assert status == 200
    assert set(reply) == {"run_id", "duration"}
    assert reply["run_id"] == run_id
    view = get(api, f"/api/get_run/{run_id}")
    assert (view["approved"], view["approver"]) == (True, "root")
    logged = actions(api)[0]
    assert (logged["action"], logged["username"], logged["message"]) == (
        "approve_run",
        "root",
        "approved",
    )


@pytest.mark.parametrize(
    ("owner", "approver", "status", "message"),
    [
        ("root", "root", 403, "You cannot approve your own run."),
        ("alice", "bob", 403, "Only approvers may approve runs."),
        ("alice", "alice", 403, "Only approvers may approve runs."),
    ],
    ids=["own-run", "not-an-approver", "owner-not-an-approver"],
)
def test_who_may_not_approve(
    api: TestClient, repo_url: str, owner: str, approver: str, status: int, message: str
) -> None:
    add_user(api, "carol", approver=True)  # root is not the only approver
    run_id = submit(api, owner, repo_url)
    headers = bearer(api, approver)
    with unchanged(api):
        reply = api.post(f"/api/runs/{run_id}/approve", headers=headers)
    assert reply.status_code == status
    assert reply.json()["error"] == f"/api/runs/{run_id}/approve: {message}"


def test_approving_twice_or_a_finished_run_is_400(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url)
    headers = bearer(api, "root")
    path = f"/api/runs/{run_id}/approve"
    with unchanged(api):
        twice = api.post(path, headers=headers)
    assert twice.status_code == 400
    assert twice.json()["error"] == f"{path}: run: This run is already approved."
    other = submit(api, "alice", repo_url)
    state(api).runs.lifecycle.stop(user(api, "alice"), other)
    path = f"/api/runs/{other}/approve"
    with unchanged(api):
        finished = api.post(path, headers=headers)
    assert finished.status_code == 400
    assert finished.json()["error"] == f"{path}: run: Run {other} is already finished."


@pytest.mark.parametrize("act", ["approve", "stop", "modify", "purge", "delete"])
@pytest.mark.parametrize("run_id", [NO_RUN, "not-a-run-id"])
def test_acting_on_an_unknown_run_is_404(lite: TestClient, act: str, run_id: str) -> None:
    headers = bearer(lite, "root")
    with unchanged(lite):
        reply = lite.post(f"/api/runs/{run_id}/{act}", json={}, headers=headers)
    assert reply.status_code == 404
    assert reply.json()["error"].startswith(f"/api/runs/{run_id}/{act}: ")


@pytest.mark.parametrize(("by", "message"), [("alice", None), ("root", "bad patch")])
def test_the_owner_or_an_approver_stops_a_run(
    api: TestClient, repo_url: str, by: str, message: str | None
) -> None:
    run_id = approved(api, repo_url, num_games=2000)
    task_id = take_task(api)["task_id"]
    body = None if message is None else {"message": message}
    status, reply = call(api, f"/api/runs/{run_id}/stop", by, body)
    assert (status, set(reply)) == (200, {"run_id", "duration"})
    view = get(api, f"/api/get_run/{run_id}")
    assert (view["finished"], view["workers"], view["why_no_workers"]) == (True, 0, ["finished"])
    assert not stored_task(api, run_id, task_id).active
    logged = actions(api)[0]
    assert (logged["action"], logged["username"]) == ("stop_run", by)
    assert logged["message"] == (message or "User stop")
    assert run_id not in get(api, "/api/active_runs")


def test_strangers_and_finished_runs_cannot_be_stopped(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url)
    path = f"/api/runs/{run_id}/stop"
    headers = bearer(api, "bob")
    with unchanged(api):
        reply = api.post(path, headers=headers)
    assert reply.status_code == 403
    assert reply.json()["error"] == f"{path}: Only the run's owner or an approver may do that."
    state(api).runs.lifecycle.stop(user(api, "alice"), run_id)
    headers = bearer(api, "alice")
    with unchanged(api):
        again = api.post(path, headers=headers)
    assert again.status_code == 400
    assert again.json()["error"] == f"{path}: run: Run {run_id} is already finished."


def test_a_stop_message_must_be_text(lite: TestClient, repo_url: str) -> None:
    run_id = approved(lite, repo_url)
    headers = bearer(lite, "alice")
    with unchanged(lite):
        reply = lite.post(f"/api/runs/{run_id}/stop", json={"message": 5}, headers=headers)
    assert reply.status_code == 400
    assert reply.json()["error"].endswith("message: expected a string")


# ---------------------------------------------------------------- modify (reference 8)


def modify(client: TestClient, run_id: str, by: str, **changes: Any) -> tuple[int, dict[str, Any]]:
    return call(client, f"/api/runs/{run_id}/modify", by, changes)


def test_modify_logs_the_difference(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=4000)
    status, reply = modify(api, run_id, "alice", num_games=2000, info="shorter", throughput=50)
    assert (status, set(reply)) == (200, {"run_id", "duration"})
    args = get(api, f"/api/get_run/{run_id}")["args"]
    assert (args["num_games"], args["info"], args["throughput"]) == (2000, "shorter", 50)
    logged = actions(api)[0]
    assert logged["action"] == "modify_run"
    assert logged["message"] == (
        "num_games: 4000 -> 2000, throughput: 100.0 -> 50.0, info: 'patch' -> 'shorter'"
    )


def test_a_modification_that_changes_nothing_logs_nothing(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=4000)
    with unchanged(api):
        status, _ = modify(api, run_id, "alice", num_games=4000, priority=0)
    assert status == 200


@pytest.mark.parametrize(
    ("by", "changes", "approved_after"),
    [
        ("alice", {"priority": 1}, False),
        ("alice", {"throughput": 150}, False),
        ("alice", {"throughput": 100, "priority": -1}, True),
        ("root", {"priority": 1, "throughput": 200}, True),
    ],
    ids=["owner-priority", "owner-throughput", "owner-within-limits", "approver"],
)
def test_a_larger_share_needs_a_new_approval(
    api: TestClient, repo_url: str, by: str, changes: dict[str, Any], approved_after: bool
) -> None:
    run_id = approved(api, repo_url)
    assert modify(api, run_id, by, **changes)[0] == 200
    view = get(api, f"/api/get_run/{run_id}")
    assert view["approved"] is approved_after
    assert view["approver"] == ("root" if approved_after else "")


def test_touching_a_failed_run_needs_a_new_approval(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=4000)
    task_id = take_task(api, "root")["task_id"]  # an approver's worker may stop runs
    body = worker_body("root", run_id=run_id, task_id=task_id, message="illegal move")
    assert post(api, "/api/stop_run", body)[0] == 200
    assert modify(api, run_id, "alice", num_games=3000)[0] == 200
    view = get(api, f"/api/get_run/{run_id}")
    assert (view["failed"], view["approved"], view["finished"]) == (True, False, False)


@pytest.mark.parametrize(
    ("kind", "by", "changes", "field", "message"),
    [
        ("fixed", "alice", {"num_games": 5000}, "num_games", "cannot get more games"),
        ("fixed", "alice", {"num_games": 1500}, "num_games", "positive multiple of 1000"),
        ("fixed", "alice", {"num_games": 0}, "num_games", "positive multiple of 1000"),
        ("sprt", "alice", {"num_games": 4_000_000}, "num_games", "must be between"),
        ("spsa", "alice", {"num_games": 10000}, "num_games", "SPSA run cannot change"),
        ("fixed", "root", {"info": "mine now"}, "info", "only the run's owner"),
        ("fixed", "alice", {"priority": "urgent"}, "priority", "must be a number"),
        ("fixed", "alice", {"throughput": -5}, "throughput", "must be at least 0"),
        ("fixed", "alice", {"auto_purge": "sometimes"}, "auto_purge", "true or false"),
    ],
)
def test_modify_rules_refuse_with_the_field(
    lite: TestClient,
    repo_url: str,
    kind: str,
    by: str,
    changes: dict[str, Any],
    field: str,
    message: str,
) -> None:
    kinds: dict[str, dict[str, Any]] = {
        "fixed": {"num_games": 4000},
        "sprt": {"sprt": {"elo0": 0, "elo1": 2}},
        "spsa": {"spsa": SPSA, "num_games": 20000},
    }
    args = kinds[kind]
    run_id = approved(lite, repo_url, **args)
    path = f"/api/runs/{run_id}/modify"
    headers = bearer(lite, by)
    with unchanged(lite):
        reply = lite.post(path, json=changes, headers=headers)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error.startswith(f"{path}: {field}: ")
    assert message in error


def test_modify_refuses_what_cannot_be_modified(lite: TestClient, repo_url: str) -> None:
    run_id = approved(lite, repo_url)
    path = f"/api/runs/{run_id}/modify"
    headers = bearer(lite, "alice")
    with unchanged(lite):
        reply = lite.post(path, json={"tc": "60+0.6", "priority": -1}, headers=headers)
    assert reply.status_code == 400
    assert reply.json()["error"] == (
        f"{path}: tc: not modifiable (allowed: auto_purge, info, num_games, priority, throughput)"
    )


def test_a_run_older_than_30_days_cannot_be_modified(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=4000)
    state(api).runs.lifecycle.stop(user(api, "alice"), run_id)  # finished: only in storage
    with state(api).storage.write() as tx:
        run = tx.runs.get(run_id)
        assert run is not None
        tx.runs.save(evolve(run, start_time=time.time() - 31 * 86400))
    path = f"/api/runs/{run_id}/modify"
    headers = bearer(api, "alice")
    with unchanged(api):
        reply = api.post(path, json={"num_games": 2000}, headers=headers)
    assert reply.status_code == 400
    assert reply.json()["error"] == (
        f"{path}: run: a run can only be modified within 30 days of its start"
    )


def test_modify_reopens_a_stopped_sprt(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, sprt={"elo0": 0, "elo1": 2}, num_games=40000)
    state(api).runs.lifecycle.stop(user(api, "alice"), run_id)
    assert get(api, f"/api/get_run/{run_id}")["finished"] is True
    assert modify(api, run_id, "alice", num_games=60000)[0] == 200
    view = get(api, f"/api/get_run/{run_id}")
    assert (view["finished"], view["args"]["num_games"]) == (False, 60000)
    assert run_id in get(api, "/api/active_runs")
    assert take_task(api)["run"]["_id"] == run_id  # workers get it again


def test_strangers_cannot_modify(lite: TestClient, repo_url: str) -> None:
    run_id = approved(lite, repo_url)
    headers = bearer(lite, "bob")
    with unchanged(lite):
        reply = lite.post(f"/api/runs/{run_id}/modify", json={"priority": -1}, headers=headers)
    assert reply.status_code == 403


# ---------------------------------------------------------------- purge, delete


def crashed_task(client: TestClient, repo_url: str, **args: Any) -> tuple[str, int]:
    """A run whose first task crashed too often (4 crashes) and was given up."""
    run_id = approved(client, repo_url, **args)
    task_id = int(take_task(client)["task_id"])
    stats = {**wire(pairs(dd=1, wd=1)), "crashes": 4}
    body = worker_body(run_id=run_id, task_id=task_id, stats=stats)
    assert post(client, "/api/update_task", body)[1]["task_alive"] is True
    failed = worker_body(run_id=run_id, task_id=task_id, message="crash")
    assert post(client, "/api/failed_task", failed)[0] == 200
    return run_id, task_id


def test_purge_takes_out_a_crashing_task(api: TestClient, repo_url: str) -> None:
    run_id, task_id = crashed_task(api, repo_url, num_games=2000)
    assert get(api, f"/api/get_run/{run_id}")["results"]["wins"] == 1
    status, reply = call(api, f"/api/runs/{run_id}/purge", "alice")
    assert status == 200
    assert reply == {"run_id": run_id, "purged_tasks": 1, "duration": reply["duration"]}
    assert get(api, f"/api/get_run/{run_id}")["results"] == wire(pairs())
    task = get(api, f"/api/get_task/{run_id}/{task_id}")
    assert task["bad"] is True
    assert task["stats"] == wire(pairs())
    logged = actions(api)[0]
    assert (logged["action"], logged["message"]) == ("purge_run", "purged 1 task(s)")


def test_get_task_shows_a_purged_task_as_it_was(api: TestClient, repo_url: str) -> None:
    """`<n>bad` is the reference's bad_tasks[n]: the n-th task purged, with the
    results it had, marked bad, with its residual (10, red, for crashes)."""
    run_id, task_id = crashed_task(api, repo_url, num_games=2000)
    before = get(api, f"/api/get_task/{run_id}/{task_id}")
    assert call(api, f"/api/runs/{run_id}/purge", "alice")[0] == 200
    bad = get(api, f"/api/get_task/{run_id}/0bad")
    assert bad == {
        **before,
        "active": False,
        "bad": True,
        "residual": 10.0,
        "residual_color": "red",
    }
    assert bad["stats"] == {**wire(pairs(dd=1, wd=1)), "crashes": 4}
    assert bad["worker_info"]["unique_key"] == "abcd-123..."  # masked as any task
    assert get(api, f"/api/get_task/{run_id}/{task_id}")["stats"] == wire(pairs())
    with unchanged(api):  # a second purge finds nothing and keeps the copy
        assert call(api, f"/api/runs/{run_id}/purge", "alice")[1]["purged_tasks"] == 0
    assert get(api, f"/api/get_task/{run_id}/0bad") == bad


@pytest.mark.parametrize("task", ["0bad", "1bad", "bad", "xbad", "-1bad", "0badbad"])
def test_get_task_of_an_unknown_purged_task_is_404(
    api: TestClient, repo_url: str, task: str
) -> None:
    run_id, _ = crashed_task(api, repo_url, num_games=2000)
    if task != "0bad":  # 0bad exists only once a purge made it
        assert call(api, f"/api/runs/{run_id}/purge", "alice")[0] == 200
    with unchanged(api):
        reply = api.get(f"/api/get_task/{run_id}/{task}")
    assert reply.status_code == 404
    assert reply.json()["error"].startswith(f"/api/get_task/{run_id}/{task}: ")


def test_purging_a_clean_run_changes_nothing(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000)
    take_task(api)
    headers = bearer(api, "alice")
    with unchanged(api):
        reply = api.post(f"/api/runs/{run_id}/purge", headers=headers)
    assert reply.status_code == 200
    assert reply.json()["purged_tasks"] == 0


@pytest.mark.parametrize(("by", "status"), [("bob", 403), ("alice", 400)])
def test_purge_refusals(api: TestClient, repo_url: str, by: str, status: int) -> None:
    run_id = approved(api, repo_url, spsa=SPSA, num_games=20000)
    headers = bearer(api, by)
    with unchanged(api):
        reply = api.post(f"/api/runs/{run_id}/purge", headers=headers)
    assert reply.status_code == status
    if status == 400:
        assert reply.json()["error"].endswith("run: SPSA runs cannot be purged.")


def test_auto_purge_takes_out_bad_tasks_and_the_run_goes_on(api: TestClient, repo_url: str) -> None:
    run_id, crashed = crashed_task(api, repo_url, num_games=8, auto_purge=True)
    task_id = int(take_task(api, key="efgh")["task_id"])  # the 4 games left
    body = worker_body(key="efgh", run_id=run_id, task_id=task_id, stats=wire(pairs(ww=2)))
    assert post(api, "/api/update_task", body)[1]["task_alive"] is False
    assert stored_task(api, run_id, crashed).bad
    run = stored_run(api, run_id)
    # 8 games were played, the crashed task's 4 were purged: 4 more are needed.
    assert (run.wins, run.losses, run.draws, run.finished) == (4, 0, 0, False)
    logged = actions(api)[0]
    assert (logged["action"], logged["message"]) == ("purge_run", "auto-purged 1 task(s)")
    assert take_task(api, key="ijkl")["run"]["_id"] == run_id


def test_auto_purge_on_stop_leaves_bad_results_out(api: TestClient, repo_url: str) -> None:
    run_id, crashed = crashed_task(api, repo_url, num_games=2000, auto_purge=True)
    assert call(api, f"/api/runs/{run_id}/stop", "alice")[0] == 200
    run = stored_run(api, run_id)
    assert (run.finished, run.wins + run.losses + run.draws) == (True, 0)
    assert stored_task(api, run_id, crashed).bad
    assert [entry["action"] for entry in actions(api)[:2]] == ["stop_run", "purge_run"]


def test_delete_hides_the_run(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000)
    task_id = take_task(api)["task_id"]
    status, reply = call(api, f"/api/runs/{run_id}/delete", "alice")
    assert (status, set(reply)) == (200, {"run_id", "duration"})
    assert api.get(f"/api/get_run/{run_id}").status_code == 404
    assert api.get(f"/api/get_elo/{run_id}").status_code == 404
    assert run_id not in get(api, "/api/active_runs")
    assert run_id not in get(api, "/api/finished_runs", page=1)
    assert not stored_task(api, run_id, task_id).active
    run = stored_run(api, run_id)
    assert (run.deleted, run.finished, run.workers) == (True, True, 0)
    assert [entry["action"] for entry in actions(api)[:1]] == ["delete_run"]
    headers = bearer(api, "alice")
    with unchanged(api):
        again = api.post(f"/api/runs/{run_id}/delete", headers=headers)
    assert again.status_code == 404


def test_strangers_cannot_delete(lite: TestClient, repo_url: str) -> None:
    run_id = approved(lite, repo_url)
    headers = bearer(lite, "bob")
    with unchanged(lite):
        reply = lite.post(f"/api/runs/{run_id}/delete", headers=headers)
    assert reply.status_code == 403


# ---------------------------------------------------------------- reading runs

RUN_KEYS = {
    "_id", "version", "start_time", "last_updated", "tc_base", "approved",
    "approver", "finished", "deleted", "failed", "failures", "is_green", "is_yellow", "workers",
    "cores", "committed_games", "total_games", "results", "nps", "games_per_minute", "args",
    "tasks", "bad_tasks",
}  # fmt: skip


def test_active_runs_lists_unfinished_runs_without_tasks(api: TestClient, repo_url: str) -> None:
    live = approved(api, repo_url, spsa=SPSA, num_games=20000, arch_filter="x86")
    pending = submit(api, "alice", repo_url)
    stopped = approved(api, repo_url)
    state(api).runs.lifecycle.stop(user(api, "alice"), stopped)
    take_task(api)
    reply = api.get("/api/active_runs")
    assert CORS not in reply.headers
    runs = reply.json()
    assert set(runs) == {live, pending}
    view = runs[live]
    assert set(view) == RUN_KEYS
    assert (view["tasks"], view["bad_tasks"], view["workers"]) == ([], [], 1)
    assert view["args"]["spsa"]["param_history"] == []
    assert "allowed_archs" not in view["args"]
    # str() of an aware UTC datetime, as the reference prints it
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?\+00:00", view["start_time"])


def finished_copies(client: TestClient, repo_url: str, count: int, **changes: Any) -> list[str]:
    """`count` finished runs (oldest first), copies of a stopped one with `changes`.

    Finished runs live only in storage (the primary keeps unfinished ones in
    memory), so storing copies is what finishing them would leave behind.
    """
    template = submit(client, changes.pop("username", "alice"), repo_url, tc=changes.pop("tc"))
    state(client).runs.lifecycle.stop(user(client, "root"), template)
    base = stored_run(client, template)
    with state(client).storage.write() as tx:
        tx.runs.save(evolve(base, deleted=True))  # the template itself is not listed
        ids = []
        for index in range(count):
            run_id = new_run_id(base.start_time + index)
            stamp = changes.get("last_updated", base.last_updated) + index
            tx.runs.add(evolve(base, id=run_id, **{**changes, "last_updated": stamp}))
            ids.append(run_id)
    return ids


@pytest.fixture
def finished(api: TestClient, repo_url: str) -> dict[str, list[str]]:
    """Finished runs of each kind, newest last in each list, all in storage."""
    now = time.time()
    return {
        "plain": finished_copies(api, repo_url, 52, tc="10+0.1", last_updated=now - 5000),
        "green": finished_copies(api, repo_url, 1, tc="10+0.1", is_green=True),
        "yellow": finished_copies(api, repo_url, 1, tc="10+0.1", is_yellow=True),
        "ltc": finished_copies(api, repo_url, 1, tc="60+0.6"),
        "root": finished_copies(api, repo_url, 1, tc="10+0.1", username="root"),
    }


def test_finished_runs_page_by_fifty_newest_first(
    api: TestClient, finished: dict[str, list[str]]
) -> None:
    first = list(get(api, "/api/finished_runs", page=1))
    second = list(get(api, "/api/finished_runs", page=2))
    assert len(first) == 50
    assert len(second) == 56 - 50
    assert second[-1] == finished["plain"][0]  # the oldest
    everything = first + second
    updated = [get(api, f"/api/get_run/{run_id}")["last_updated"] for run_id in everything]
    assert updated == sorted(updated, reverse=True)
    assert get(api, "/api/finished_runs", page=3) == {}


@pytest.mark.parametrize(
    ("params", "kind"),
    [
        ({"success_only": "1"}, "green"),
        ({"yellow_only": "on"}, "yellow"),
        ({"ltc_only": "yes"}, "ltc"),
        ({"username": "root"}, "root"),
    ],
)
def test_finished_runs_filters(
    api: TestClient, finished: dict[str, list[str]], params: dict[str, str], kind: str
) -> None:
    assert list(get(api, "/api/finished_runs", page=1, **params)) == finished[kind]


def test_finished_runs_since_a_timestamp(api: TestClient, finished: dict[str, list[str]]) -> None:
    cutoff = time.time() - 1000  # the plain runs were updated earlier
    since = get(api, "/api/finished_runs", page=1, timestamp=f"{cutoff:.3f}")
    expected = {run_id for kind in ("green", "yellow", "ltc", "root") for run_id in finished[kind]}
    assert set(since) == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("", "page"),
        ("?page=0", "page"),
        ("?page=x", "page"),
        ("?page=\u00b9", "page"),  # a digit to str.isdigit, not to int()
        ("?page=" + "9" * 5000, "page"),
        ("?page=-1", "page"),
        ("?page=1&timestamp=12345", "timestamp"),
        ("?page=1&timestamp=yesterday", "timestamp"),
    ],
)
def test_finished_runs_refuses_bad_paging(lite: TestClient, query: str, field: str) -> None:
    reply = lite.get(f"/api/finished_runs{query}")
    assert reply.status_code == 400
    assert reply.json()["error"].startswith(f"/api/finished_runs: {field}: ")


def test_get_run_shows_the_run_with_cors(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000)
    take_task(api)
    reply = api.get(f"/api/get_run/{run_id}")
    assert reply.headers[CORS] == "*"
    view = reply.json()
    assert set(view) == {*RUN_KEYS, "why_no_workers"}
    assert (view["_id"], view["workers"], view["cores"], view["tasks"]) == (run_id, 1, 4, [])
    assert view["why_no_workers"] == []  # it has one
    assert "duration" not in view  # the document itself, as the reference


@pytest.mark.parametrize("run_id", [NO_RUN, "zzz", "0" * 25])
def test_get_run_of_an_unknown_run_is_a_json_404(lite: TestClient, run_id: str) -> None:
    reply = lite.get(f"/api/get_run/{run_id}")
    assert reply.status_code == 404
    assert set(reply.json()) == {"error", "duration"}
    assert reply.json()["error"].startswith(f"/api/get_run/{run_id}: ")


def why(client: TestClient, run_id: str) -> list[str]:
    reasons: list[str] = get(client, f"/api/get_run/{run_id}")["why_no_workers"]
    return reasons


def test_why_no_workers_explains_each_state(api: TestClient, repo_url: str) -> None:
    pending = submit(api, "alice", repo_url)
    assert why(api, pending) == [NOT_APPROVED]

    waiting = approved(api, repo_url, priority=-1)
    assert why(api, waiting) == ["no worker has asked for work since it became available"]

    big = approved(api, repo_url, threads=8, priority=1)
    arm = approved(api, repo_url, arch_filter="armv8", priority=1)
    post(api, "/api/request_task", worker_body())  # 4 cores, x86-64-bmi2: fits neither
    assert why(api, big) == [f"{TOO_MANY_THREADS} (1 request)"]
    assert why(api, arm) == [f"{ARCH} (1 request)"]
    assert why(api, waiting) == []  # it got the worker

    state(api).runs.lifecycle.stop(user(api, "alice"), big)
    assert why(api, big) == ["finished"]


def test_get_task_masks_the_workers_identity(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000)
    task_id = take_task(api)["task_id"]
    reply = api.get(f"/api/get_task/{run_id}/{task_id}")
    assert reply.status_code == 200
    assert CORS not in reply.headers
    task = reply.json()
    assert task["task_id"] == task_id
    assert (task["num_games"], task["start"], task["active"]) == (232, 0, True)
    assert task["stats"] == wire(pairs())
    info = task["worker_info"]
    assert info["unique_key"] == "abcd-123..."
    assert info["remote_addr"] == "?.?.?.?"
    assert info["username"] == "alice"
    state(api).runs.lifecycle.stop(user(api, "alice"), run_id)
    assert get(api, f"/api/get_task/{run_id}/{task_id}")["active"] is False  # from storage


@pytest.mark.parametrize("task", ["1", "abc", "-1", "\u00b9", "9" * 30])
def test_get_task_of_an_unknown_task_is_404(lite: TestClient, repo_url: str, task: str) -> None:
    run_id = approved(lite, repo_url)
    take_task(lite)
    reply = lite.get(f"/api/get_task/{run_id}/{task}")
    assert reply.status_code == 404
    assert reply.json()["error"].startswith(f"/api/get_task/{run_id}/{task}: ")


def test_get_elo_estimates_an_sprt(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, sprt={"elo0": 0, "elo1": 2})
    task_id = take_task(api)["task_id"]
    stats = wire(pairs(ld=3, dd=6, wd=5, ww=2))
    post(api, "/api/update_task", worker_body(run_id=run_id, task_id=task_id, stats=stats))
    view = get(api, f"/api/get_elo/{run_id}")
    assert set(view["elo"]) == {"a", "b", "elo", "ci", "LOS", "LLR"}
    assert view["elo"]["LLR"] == pytest.approx(view["args"]["sprt"]["llr"])
    assert view["elo"]["ci"][0] < view["elo"]["elo"] < view["elo"]["ci"][1]
    assert view["results"] == stats


def test_get_elo_of_a_run_without_sprt_is_empty(api: TestClient, repo_url: str) -> None:
    """The reference answers {} (no run document at all) for a run without SPRT."""
    run_id = approved(api, repo_url, num_games=2000)
    assert get(api, f"/api/get_elo/{run_id}") == {}
    assert api.get(f"/api/get_elo/{NO_RUN}").status_code == 404


@pytest.mark.parametrize("approve", [True, False])
def test_get_elo_of_an_sprt_without_games_has_numbers(
    api: TestClient, repo_url: str, approve: bool
) -> None:
    """As the reference, whose statistics regularize the counts: an even
    estimate, approved or not."""
    sprt = {"elo0": 0, "elo1": 2}
    if approve:
        run_id = approved(api, repo_url, sprt=sprt)
    else:
        run_id = submit(api, "alice", repo_url, sprt=sprt)
    view = get(api, f"/api/get_elo/{run_id}")
    assert view["_id"] == run_id
    assert set(view["elo"]) == {"a", "b", "elo", "ci", "LOS", "LLR"}
    assert view["elo"]["elo"] == pytest.approx(0.0)
    assert view["elo"]["LOS"] == pytest.approx(0.5)
    assert view["elo"]["a"] < 0 < view["elo"]["b"]


@pytest.mark.parametrize(
    "path", ["/api/active_runs", "/api/finished_runs?page=1", "/api/calc_elo?W=10&D=20&L=5"]
)
def test_cors_only_where_the_reference_has_it(lite: TestClient, path: str) -> None:
    reply = lite.get(path)
    assert reply.status_code == 200
    assert CORS not in reply.headers
