"""POST /api/actions on both backends: the body is a MongoDB-style query, as
Fishtest clients send it; at most 200 actions, oldest first; `_id` is 24 hex
digits; a query we cannot answer is a 400 that names what is wrong.

(The query language itself is tested against MongoDB's rules in
tests/domain/test_action_query.py.)
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from arbiter.domain import action_query as audit_query
from arbiter.domain import actions as audit
from arbiter.domain.search_time import SEARCH_BURST_SECONDS
from arbiter.storage.base import NewAction
from tests.web.api_support import api_with_users, submit
from tests.web.support import state

CORS = "access-control-allow-origin"
T = 1_800_000_000.0


@pytest.fixture
def api(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    with api_with_users(tmp_path, database_url, monkeypatch, "bob") as client:
        yield client


@pytest.fixture
def lite(
    tmp_path: Path, sqlite_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    """SQLite only: for refusals decided before storage matters."""
    with api_with_users(tmp_path, sqlite_database_url, monkeypatch, "bob") as client:
        yield client


def log_many(client: TestClient, count: int) -> None:
    with state(client).storage.write() as tx:
        for index in range(count):
            name = "alice" if index % 2 else "bob"
            kind = "log_message" if index % 3 else "failed_task"
            audit.record(
                tx, NewAction(time=T + index, action=kind, username=name, message=f"entry {index}")
            )


def listed(client: TestClient, body: Any) -> list[dict[str, Any]]:
    reply = client.post("/api/actions", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.headers[CORS] == "*"
    assert reply.headers["access-control-allow-headers"] == "content-type"
    found: list[dict[str, Any]] = reply.json()
    return found


def times(found: list[dict[str, Any]]) -> list[float]:
    return [entry["time"] for entry in found]


def test_at_most_200_oldest_first(api: TestClient) -> None:
    log_many(api, 250)  # after the accounts' actions, which are older than T
    everything = listed(api, {"time": {"$gte": T}})
    assert times(everything) == [T + index for index in range(200)]
    assert times(listed(api, {}))[-1] == T + 200 - len(listed(api, {"time": {"$lt": T}})) - 1
    assert all(len(entry["_id"]) == 24 for entry in everything)
    assert all(int(entry["_id"], 16) for entry in everything)
    assert len(listed(api, {"max_count": 3})) == 3


def test_a_time_range(api: TestClient) -> None:
    log_many(api, 250)
    window = listed(api, {"time": {"$gte": T + 100, "$lt": T + 110}})
    assert times(window) == [T + index for index in range(100, 110)]
    recent = listed(api, {"time": {"$gt": T + 240}})
    assert times(recent) == [T + index for index in range(241, 250)]


def test_username_and_action(api: TestClient, repo_url: str) -> None:
    run_id = submit(api, "alice", repo_url)
    log_many(api, 60)
    bobs = listed(api, {"username": "bob", "action": {"$in": ["failed_task", "x"]}})
    assert times(bobs) == [T + index for index in range(0, 60, 6)]
    others = listed(
        api, {"username": {"$ne": "bob"}, "action": {"$nin": ["log_message", "upload_book"]}}
    )
    assert {(e["username"], e["action"]) for e in others} == {
        ("alice", "failed_task"),
        ("alice", "new_run"),
    }
    assert [(e["action"], e["run_id"]) for e in listed(api, {"run_id": run_id})] == [
        ("new_run", run_id)
    ]


def test_or_exists_and_regex(api: TestClient, repo_url: str) -> None:
    run_id = submit(api, "alice", repo_url)
    log_many(api, 30)
    either = listed(api, {"$or": [{"run_id": {"$exists": True}}, {"message": "entry 7"}]})
    assert [e["action"] for e in either] == ["new_run", "log_message"]  # the run is older
    assert either[0]["run_id"] == run_id
    matched = listed(api, {"message": {"$regex": "^ENTRY 2.$", "$options": "i"}})
    assert [e["message"] for e in matched] == [f"entry {index}" for index in range(20, 30)]


def test_before_and_max_count_of_the_first_version_still_work(api: TestClient) -> None:
    log_many(api, 20)
    older = listed(api, {"before": T + 10, "max_count": 3})
    assert times(older) == [T + 9, T + 8, T + 7]
    assert len(listed(api, {"max_count": 0})) == 1
    assert len(listed(api, {"max_count": 10_000, "time": {"$gte": T}})) == 20
    assert listed(api, {"action": "no_such_action"}) == []


def test_one_action_by_its_id_and_the_ones_after(api: TestClient) -> None:
    log_many(api, 5)
    everything = listed(api, {"time": {"$gte": T}})
    assert listed(api, {"_id": everything[2]["_id"]}) == [everything[2]]
    assert listed(api, {"_id": {"$gt": everything[2]["_id"]}}) == everything[3:]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"$where": "sleep(100)"}, "unknown operator: $where"),
        ({"time": {"$gt": 0, "$mod": [2, 0]}}, "unknown operator: $mod"),
        ({"action": {"$in": "stop_run"}}, "action.$in: expected an array"),
        ({"message": {"$regex": "(a+)+$"}}, "message.$regex: a group cannot be repeated"),
        ({"message": {"$regex": ".*.*x"}}, "message.$regex: at most one unbounded repeat"),
        ({"max_count": "10"}, "max_count: expected an integer"),
        ({"before": "yesterday"}, "before: expected a Unix time in seconds"),
        (["username"], "request body must be a JSON object"),
    ],
)
def test_refusals_name_the_culprit(lite: TestClient, body: Any, message: str) -> None:
    reply = lite.post("/api/actions", json=body)
    assert reply.status_code == 400
    error = reply.json()
    assert error["error"].startswith(f"/api/actions: {message}")
    assert isinstance(error["duration"], float)


def test_searches_past_the_slots_are_told_to_retry(lite: TestClient) -> None:
    slots = state(lite).actions._search_slots
    taken = 0
    while slots.acquire(blocking=False):  # every slot busy, as under a flood
        taken += 1
    try:
        reply = lite.post("/api/actions", json={})
    finally:
        for _ in range(taken):
            slots.release()
    assert reply.status_code == 503
    assert reply.headers["retry-after"] == "1"
    assert "too many event-log searches" in reply.json()["error"]
    assert lite.post("/api/actions", json={}).status_code == 200


def test_searches_past_their_share_of_cpu_are_told_when_to_come_back(lite: TestClient) -> None:
    """A flood of the worst queries spends the searches' time: the next search
    is refused until the share has paid it back, as Retry-After says."""
    search_time = state(lite).actions._search_time
    search_time.spend(SEARCH_BURST_SECONDS + 1.0)  # a second in debt: 5 s at a fifth
    reply = lite.post("/api/actions", json={})
    assert reply.status_code == 503
    assert 4 <= int(reply.headers["retry-after"]) <= 5
    assert "too many event-log searches" in reply.json()["error"]


def test_a_long_or_is_refused_before_any_sql(lite: TestClient) -> None:
    branches = [{"message": f"m{n}"} for n in range(audit_query.MAX_BRANCHES + 1)]
    reply = lite.post("/api/actions", json={"$or": branches})
    assert reply.status_code == 400
    assert "$or: at most 100 queries" in reply.json()["error"]
