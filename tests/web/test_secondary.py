"""A secondary on the primary's database (reference 7.3): it serves every read
from storage, exactly as the primary does, and answers worker calls and run
mutations with JSON 503 `{error, duration}`, changing nothing, so workers and
scripts back off and retry against the primary."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.domain.runs.support import pairs
from tests.web.api_support import (
    PGN,
    PRIMARY_ONLY_WORKER_PATHS,
    api_client,
    api_settings,
    approved,
    post,
    submit,
    take_task,
    unchanged,
    user,
    users,
    wire,
    worker_body,
)
from tests.web.support import STRONG_PASSWORD, state

Apps = tuple[TestClient, TestClient]

MUTATIONS = ("approve", "stop", "modify", "purge", "delete")


@pytest.fixture
def apps(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Apps]:
    """(primary, secondary) on one database, on each backend; alice and root exist."""
    with api_client(api_settings(tmp_path, database_url), monkeypatch) as primary:
        users(primary)
        secondary_settings = api_settings(tmp_path, database_url, role="secondary")
        with api_client(secondary_settings, monkeypatch) as secondary:
            yield primary, secondary


@pytest.fixture
def runs(apps: Apps, repo_url: str) -> dict[str, Any]:
    """On the primary: a run with a task and results, a pending run and a finished SPRT."""
    primary, _ = apps
    live = approved(primary, repo_url, num_games=2000)
    task_id = int(take_task(primary)["task_id"])
    stats = wire(pairs(ld=2, dd=5, wd=3, ww=1))
    update = worker_body(run_id=live, task_id=task_id, stats=stats)
    assert post(primary, "/api/update_task", update)[1]["task_alive"] is True
    finished = approved(primary, repo_url, sprt={"elo0": 0, "elo1": 2})
    state(primary).runs.lifecycle.stop(user(primary, "alice"), finished)
    return {
        "live": live,
        "task_id": task_id,
        "pending": submit(primary, "alice", repo_url),
        "finished": finished,
    }


def same_json(apps: Apps, path: str, *, drop: tuple[str, ...] = ()) -> Any:
    """GET `path` on both; the replies must agree (but for `drop`ped keys)."""
    replies = [client.get(path) for client in apps]
    assert [reply.status_code for reply in replies] == [200, 200], replies[1].text
    primary, secondary = (reply.json() for reply in replies)
    if drop:
        primary = {k: v for k, v in primary.items() if k not in drop}
        secondary = {k: v for k, v in secondary.items() if k not in drop}
    assert secondary == primary
    return secondary


def test_a_secondary_serves_the_reads(apps: Apps, runs: dict[str, Any]) -> None:
    live, finished = runs["live"], runs["finished"]
    active = same_json(apps, "/api/active_runs")
    assert set(active) == {live, runs["pending"]}
    assert active[live]["results"] == wire(pairs(ld=2, dd=5, wd=3, ww=1))
    assert list(same_json(apps, "/api/finished_runs?page=1")) == [finished]
    # why_no_workers counts refusals the primary saw; a secondary never sees requests.
    for run_id in (live, finished, runs["pending"]):
        same_json(apps, f"/api/get_run/{run_id}", drop=("why_no_workers",))
        same_json(apps, f"/api/get_elo/{run_id}", drop=("why_no_workers",))
    assert same_json(apps, f"/api/get_task/{live}/{runs['task_id']}")["active"] is True
    for body in ({}, {"run_id": live}, {"username": "root", "max_count": 3}):
        replies = [client.post("/api/actions", json=body) for client in apps]
        assert replies[1].json() == replies[0].json()
        assert replies[1].headers["access-control-allow-origin"] == "*"
    _, secondary = apps
    assert secondary.get("/api/calc_elo", params={"W": 10, "D": 20, "L": 5}).status_code == 200
    assert secondary.get(f"/api/get_run/{'0' * 24}").status_code == 404


def test_a_secondary_sees_what_the_primary_committed(apps: Apps, runs: dict[str, Any]) -> None:
    """Results are written through before the primary replies: no flush lag."""
    primary, secondary = apps
    stats = wire(pairs(ld=2, dd=6, wd=4, ww=2))
    update = worker_body(run_id=runs["live"], task_id=runs["task_id"], stats=stats)
    assert post(primary, "/api/update_task", update)[0] == 200
    assert secondary.get(f"/api/get_run/{runs['live']}").json()["results"] == stats


def worker_call(path: str, runs: dict[str, Any]) -> dict[str, Any]:
    """A body the primary would accept for `path` (valid credentials and task)."""
    if path == "/api/request_version":
        return {"password": STRONG_PASSWORD, "worker_info": {"username": "alice"}}
    task = {"run_id": runs["live"], "task_id": runs["task_id"]}
    extra: dict[str, Any] = {
        "/api/request_task": {},
        "/api/update_task": {**task, "stats": wire(pairs(ld=3, dd=5, wd=3, ww=1))},
        "/api/beat": task,
        "/api/request_spsa": task,
        "/api/failed_task": {**task, "message": "crash"},
        "/api/stop_run": {**task, "message": "bad bench"},
        "/api/worker_log": {"message": "hello"},
    }[path]
    return worker_body(**extra)


def test_worker_calls_get_a_json_503(apps: Apps, runs: dict[str, Any]) -> None:
    primary, secondary = apps
    for path in PRIMARY_ONLY_WORKER_PATHS:
        with unchanged(primary):
            reply = secondary.post(path, json=worker_call(path, runs))
        assert reply.status_code == 503, path
        assert reply.json() == f"{path}: primary instance required"  # a refusal for now
        assert reply.headers["retry-after"] == "5"


def test_pgn_uploads_reach_their_handler(apps: Apps, runs: dict[str, Any]) -> None:
    """The one worker call a secondary takes: it checks credentials there."""
    primary, secondary = apps
    body = worker_body(password="wrong", run_id=runs["live"], task_id=runs["task_id"], pgn=PGN)
    with unchanged(primary):
        reply = secondary.post("/api/upload_pgn", json=body)
    assert reply.status_code == 401


def test_run_mutations_get_a_json_503(apps: Apps, runs: dict[str, Any], repo_url: str) -> None:
    primary, secondary = apps
    token = state(primary).accounts.create_token("root")
    paths = ["/api/runs", *(f"/api/runs/{runs['pending']}/{act}" for act in MUTATIONS)]
    for path in paths:
        body = {"tests_repo": repo_url, "new_tag": "patch"} if path == "/api/runs" else {}
        for headers in ({"authorization": f"Bearer {token}"}, {}):
            with unchanged(primary):
                reply = secondary.post(path, json=body, headers=headers)
            assert reply.status_code == 503, (path, headers)
            payload = reply.json()
            assert payload == {
                "error": f"{path}: primary instance required",
                "duration": payload["duration"],
            }
