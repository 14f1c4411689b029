"""Wire compatibility with the reference, key by key, on both backends.

One world per backend is built through the real app (runs in every state,
tasks played through the worker API, the actions they leave); each test then
reads one kind of document or reply and checks it against the reference's
shape in `wire_shapes`: every key the reference sends is present with the
reference's type. Arbiter may add keys; it must never drop, rename or retype one.
"""

import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from arbiter.domain.runs.ingest import deactivate
from arbiter.domain.workers import WorkerBlocks
from arbiter.storage.base import ActionFilter
from arbiter.storage.engine import normalize_url, sqlite_url
from arbiter.web import app as app_module
from arbiter.web.app import create_app
from tests.conftest import BACKENDS, _libpq, postgres_admin_url
from tests.domain.runs.support import pairs
from tests.web import wire_shapes as shapes
from tests.web.api_support import PGN, add_user, api_settings, post, user, wire, worker_body
from tests.web.support import state

SPRT = {"sprt": {"elo0": 0, "elo1": 2}}
SPSA = {
    "spsa": {"A": 0.1, "alpha": 0.602, "gamma": 0.101, "raw_params": "Tempo,20,0,50,5,0.002"},
    "num_games": 20000,
}
NET = b"NNUE" + bytes(range(256)) * 4
NET_NAME = f"nn-{hashlib.sha256(NET).hexdigest()[:12]}.nnue"


@dataclass
class World:
    """The app after the scenario, and what the scenario saw on the way."""

    client: TestClient
    runs: dict[str, str] = field(default_factory=dict)  # name -> run id
    tasks: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (run, task)
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> worker reply


# ---------------------------------------------------------------- the database


@contextmanager
def database(request: pytest.FixtureRequest, directory: Path) -> Iterator[str]:
    """A fresh migrated database on the fixture's backend, for the whole module."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        shutil.copy(template, directory / "arbiter.sqlite3")
        yield sqlite_url(directory)
        return
    admin = postgres_admin_url()
    template_name = request.getfixturevalue("postgres_template")
    if admin is None or template_name is None:
        pytest.skip("PostgreSQL not available (set ARBITER_TEST_POSTGRES_URL)")
    name = f"arbiter_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(admin), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_name}"')
    try:
        yield str(make_url(normalize_url(admin)).set(database=name).render_as_string(False))
    finally:
        with psycopg.connect(_libpq(admin), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module", params=BACKENDS)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, repo_url: str
) -> Iterator[World]:
    # Built once per backend: the tests only read it.
    directory = tmp_path_factory.mktemp("wire")
    with pytest.MonkeyPatch.context() as patch, database(request, directory) as url:
        for name in list(os.environ):
            if name.startswith("ARBITER_") and not name.startswith("ARBITER_TEST_"):
                patch.delenv(name)
        patch.setattr(app_module, "DRAIN_SECONDS", 0.0)
        with TestClient(create_app(api_settings(directory, url)), base_url="http://t") as client:
            built = World(client)
            build(built, repo_url)
            yield built


# ---------------------------------------------------------------- the scenario


def build(world: World, repo_url: str) -> None:
    client = world.client
    add_user(client, "alice")
    add_user(client, "root", approver=True)
    add_user(client, "bob")
    world.runs["pending"] = submit(client, repo_url, **SPRT)
    finished_sprt(world, repo_url)
    fixed_games(world, repo_url)
    stopped_by_worker(world, repo_url)
    spsa_run(world, repo_url)
    active_sprt(world, repo_url)
    fleet_and_accounts(world, repo_url)
    password_guesses(world)


def password_guesses(world: World) -> None:
    """Wrong worker passwords for bob past his free failures: the wait that
    begins is a system_event action."""
    for _ in range(6):
        status, _ = post(
            world.client, "/api/request_version", worker_body("bob", "bbbb", password="x")
        )
        assert status in (401, 429)


def submit(client: TestClient, repo_url: str, **args: Any) -> str:
    body = {"tests_repo": repo_url, "base_tag": "master", "new_tag": "patch", **args}
    return state(client).runs.lifecycle.submit(user(client, "alice"), body)


def approve(client: TestClient, repo_url: str, **args: Any) -> str:
    run_id = submit(client, repo_url, **args)
    state(client).runs.lifecycle.approve(user(client, "root"), run_id)
    return run_id


def call(world: World, path: str, key: str, *, username: str = "alice", **fields: Any) -> Any:
    status, reply = post(world.client, path, worker_body(username, key, **fields))
    return reply if status == 200 else {"status": status, **reply}


def take(world: World, key: str, run_id: str, username: str = "alice") -> int:
    reply = call(world, "/api/request_task", key, username=username)
    assert reply.get("run", {}).get("_id") == run_id, reply
    world.replies.setdefault("request_task", reply)
    return int(reply["task_id"])


def games(world: World, run_id: str, task_id: int) -> int:
    return int(state(world.client).runs.queries.get_task(run_id, task_id)["num_games"])


def finished_sprt(world: World, repo_url: str) -> None:
    """Won pairs until the SPRT accepts; the last update is told the task is over."""
    run_id = world.runs["sprt_finished"] = approve(world.client, repo_url, **SPRT)
    for _ in range(20):
        task_id = take(world, "aaaa", run_id)
        quarter = games(world, run_id, task_id) // 8
        stats = wire(pairs(ww=2 * quarter, wd=quarter, dd=quarter))
        where: dict[str, Any] = {"run_id": run_id, "task_id": task_id}
        reply = call(world, "/api/update_task", "aaaa", **where, stats=stats)
        if state(world.client).runs.queries.run(run_id).finished:
            break
    world.replies["update_task_finishing"] = reply
    world.tasks["finished"] = (run_id, task_id)
    assert state(world.client).runs.queries.run(run_id).finished


def fixed_games(world: World, repo_url: str) -> None:
    """A fixed-games run whose first task crashed: purged, then played again."""
    run_id = world.runs["fixed"] = approve(world.client, repo_url, num_games=400)
    task_id = take(world, "cccc", run_id)
    stats = {**wire(pairs(dd=games(world, run_id, task_id) // 2)), "crashes": 5}
    call(world, "/api/update_task", "cccc", run_id=run_id, task_id=task_id, stats=stats)
    assert state(world.client).runs.lifecycle.purge(user(world.client, "root"), run_id) == 1
    world.tasks["purged"] = (run_id, task_id)
    for _ in range(10):  # the purge took its games away: play them again
        task_id = take(world, "dddd", run_id)
        stats = wire(pairs(ww=games(world, run_id, task_id) // 2))
        call(world, "/api/update_task", "dddd", run_id=run_id, task_id=task_id, stats=stats)
        if state(world.client).runs.queries.run(run_id).finished:
            break
    assert state(world.client).runs.queries.run(run_id).finished


def stopped_by_worker(world: World, repo_url: str) -> None:
    """Failed, dead and refused tasks, a worker's log, a PGN, then a worker's stop."""
    run_id = world.runs["stopped"] = approve(world.client, repo_url, num_games=20000)
    failing = take(world, "ffff", run_id)
    where: dict[str, Any] = {"run_id": run_id, "task_id": failing}
    crashed = {**wire(pairs(dd=2)), "crashes": 4}  # a crash_or_time task once it fails
    call(world, "/api/update_task", "ffff", **where, stats=crashed)
    world.replies["failed_task"] = call(world, "/api/failed_task", "ffff", **where, message="oops")
    world.replies["failed_task_again"] = call(world, "/api/failed_task", "ffff", **where)
    world.replies["beat_inactive"] = call(world, "/api/beat", "ffff", **where)
    world.replies["update_task_inactive"] = call(
        world, "/api/update_task", "ffff", **where, stats=wire(pairs())
    )
    world.tasks["failed"] = (run_id, failing)

    dead = take(world, "eeee", run_id)
    deactivate(state(world.client).runs.context, run_id, dead, "no beat", action="dead_task")

    refused = take(world, "gggg", run_id)
    where = {"run_id": run_id, "task_id": refused}
    world.replies["worker_log"] = call(world, "/api/worker_log", "gggg", **where, message="hi")
    world.replies["worker_log_plain"] = call(world, "/api/worker_log", "gggg", message="hello")
    world.replies["upload_pgn"] = call(world, "/api/upload_pgn", "gggg", **where, pgn=PGN)
    world.replies["stop_run_refused"] = call(world, "/api/stop_run", "gggg", **where, message="x")

    stopping = take(world, "rrrr", run_id, username="root")
    where = {"run_id": run_id, "task_id": stopping}
    world.replies["stop_run"] = call(
        world, "/api/stop_run", "rrrr", username="root", **where, message="bad bench"
    )
    assert state(world.client).runs.queries.run(run_id).finished


def spsa_run(world: World, repo_url: str) -> None:
    """An SPSA run left active, its task holding the flips of its next batch."""
    run_id = world.runs["spsa"] = approve(world.client, repo_url, **SPSA)
    task_id = take(world, "ssss", run_id)
    where: dict[str, Any] = {"run_id": run_id, "task_id": task_id}
    first = world.replies["request_spsa"] = call(world, "/api/request_spsa", "ssss", **where)
    spsa = {"wins": 2, "losses": 0, "draws": 0, "num_games": 2, "sig": first["sig"]}
    stats = wire(pairs(ww=1))
    call(world, "/api/update_task", "ssss", **where, stats=stats, spsa=spsa)
    call(world, "/api/request_spsa", "ssss", **where)
    world.tasks["spsa"] = (run_id, task_id)


def active_sprt(world: World, repo_url: str) -> None:
    """The best-ranked run, so it gets the next workers; one reports, one beats."""
    run_id = world.runs["sprt_active"] = approve(world.client, repo_url, **SPRT, priority=1)
    playing = take(world, "llll", run_id)
    where: dict[str, Any] = {"run_id": run_id, "task_id": playing}
    stats = wire(pairs(ld=8, dd=16, wd=8))
    world.replies["update_task"] = call(world, "/api/update_task", "llll", **where, stats=stats)
    world.tasks["active"] = (run_id, playing)
    beating = take(world, "mmmm", run_id)
    world.replies["beat"] = call(world, "/api/beat", "mmmm", run_id=run_id, task_id=beating)
    world.tasks["fresh"] = (run_id, beating)
    lifecycle = state(world.client).runs.lifecycle
    lifecycle.modify(user(world.client, "alice"), run_id, {"throughput": 150})


def fleet_and_accounts(world: World, repo_url: str) -> None:
    client = world.client
    root = user(client, "root")
    _, reply = post(client, "/api/request_version", worker_body("alice", "vvvv"))
    world.replies["request_version"] = reply
    lonely = worker_body("alice", "nnnn")
    lonely["worker_info"]["min_threads"] = 64  # no run has that many threads
    world.replies["no_task"] = post(client, "/api/request_task", lonely)[1]
    app = state(client)
    blocks = WorkerBlocks(app.storage, changed=app.runs.blocked_machines.forget)
    blocks.set_blocked(root, "alice-4cores-bbbb", blocked=True, message="flaky")
    world.replies["blocked_task"] = call(world, "/api/request_task", "bbbb")

    deleted = submit(client, repo_url)
    state(client).runs.lifecycle.delete(user(client, "alice"), deleted)

    accounts = state(client).accounts
    accounts.signup("carol", "correct horse battery staple 1729", "carol@example.org")
    accounts.accept("root", "carol")
    accounts.set_blocked("root", "bob", True)
    token = accounts.create_token("alice")
    uploaded = client.post(
        f"/api/upload_net?name={NET_NAME}",
        content=NET,
        headers={"authorization": f"Bearer {token}"},
    )
    assert uploaded.status_code == 200, uploaded.text


# ---------------------------------------------------------------- helpers


def get(world: World, path: str) -> Any:
    reply = world.client.get(path)
    assert reply.status_code == 200, reply.text
    return reply.json()


def assert_shape(value: Any, shape: shapes.Shape, what: str) -> None:
    found = shapes.problems(value, shape, what)
    assert found == [], "\n".join(found)


def get_run(world: World, name: str) -> dict[str, Any]:
    view: dict[str, Any] = get(world, f"/api/get_run/{world.runs[name]}")
    return view


# ---------------------------------------------------------------- runs

RUN_NAMES = ["pending", "sprt_active", "sprt_finished", "fixed", "stopped", "spsa"]


@pytest.mark.parametrize("name", RUN_NAMES)
def test_get_run_has_the_reference_run_shape(world: World, name: str) -> None:
    assert_shape(get_run(world, name), shapes.RUN, f"get_run({name})")


@pytest.mark.parametrize("name", RUN_NAMES)
def test_a_run_carries_the_reference_run_version(world: World, name: str) -> None:
    assert get_run(world, name)["version"] == shapes.RUN_VERSION


def test_each_kind_of_run_has_its_own_arguments(world: World) -> None:
    assert "sprt" in get_run(world, "sprt_active")["args"]
    assert "spsa" in get_run(world, "spsa")["args"]
    assert {"sprt", "spsa"}.isdisjoint(get_run(world, "fixed")["args"])


def test_nets_are_lists_even_before_they_are_known(world: World) -> None:
    args = get_run(world, "pending")["args"]
    assert (args["base_nets"], args["new_nets"]) == ([], [])


def test_the_scenario_reached_each_state(world: World) -> None:
    seen = {name: get_run(world, name) for name in RUN_NAMES}
    assert not seen["pending"]["approved"]
    assert seen["sprt_active"]["workers"] > 0
    assert seen["sprt_finished"]["args"]["sprt"]["state"] == "accepted"
    assert seen["sprt_finished"]["is_green"]
    assert seen["fixed"]["finished"]
    assert (seen["stopped"]["failed"], seen["stopped"]["failures"]) == (True, 1)
    assert seen["spsa"]["args"]["spsa"]["iter"] > 0


def test_active_runs_have_the_reference_shape(world: World) -> None:
    listed = get(world, "/api/active_runs")
    assert {world.runs[name] for name in ("pending", "sprt_active", "spsa")} <= set(listed)
    for run_id, view in listed.items():
        assert view["_id"] == run_id
        assert_shape(view, shapes.LISTED_RUN, f"active_runs[{run_id}]")


def test_finished_runs_have_the_reference_shape(world: World) -> None:
    listed = get(world, "/api/finished_runs?page=1")
    assert {world.runs[name] for name in ("sprt_finished", "fixed", "stopped")} <= set(listed)
    for run_id, view in listed.items():
        assert view["_id"] == run_id
        assert_shape(view, shapes.LISTED_RUN, f"finished_runs[{run_id}]")


def test_rate_limit_has_the_reference_shape_and_says_no_call_was_made(world: World) -> None:
    snapshot = get(world, "/api/rate_limit")
    assert_shape(snapshot, shapes.RATE_LIMIT, "rate_limit")
    assert snapshot["used"] == 0
    assert snapshot["remaining"] == snapshot["limit"] > 10  # never "near the limit"
    assert snapshot["reset"] > time.time()
    assert "none" in snapshot["github_api_calls"]


# ---------------------------------------------------------------- tasks

TASK_NAMES = ["active", "fresh", "finished", "failed", "spsa", "purged"]


@pytest.mark.parametrize("name", TASK_NAMES)
def test_get_task_has_the_reference_task_shape(world: World, name: str) -> None:
    run_id, task_id = world.tasks[name]
    assert_shape(get(world, f"/api/get_task/{run_id}/{task_id}"), shapes.TASK, name)


def test_an_spsa_task_shows_the_flips_it_waits_for(world: World) -> None:
    run_id, task_id = world.tasks["spsa"]
    task = get(world, f"/api/get_task/{run_id}/{task_id}")
    assert task["active"]
    assert "spsa_params" in task


def test_a_purged_task_is_marked_bad_with_zero_results(world: World) -> None:
    run_id, task_id = world.tasks["purged"]
    task = get(world, f"/api/get_task/{run_id}/{task_id}")
    assert (task["bad"], task["active"], task["stats"]["pentanomial"]) == (True, False, [0] * 5)


def test_get_task_bad_has_the_reference_bad_task_shape(world: World) -> None:
    run_id, _ = world.tasks["purged"]
    reply = world.client.get(f"/api/get_task/{run_id}/0bad")
    assert reply.status_code == 200, reply.text
    assert_shape(reply.json(), shapes.BAD_TASK, "get_task(0bad)")


# ---------------------------------------------------------------- actions


def all_actions(world: World) -> list[dict[str, Any]]:
    everything: list[dict[str, Any]] = state(world.client).actions.list(
        ActionFilter(max_count=5000)
    )
    return everything


# The reference writes log_message only when a MongoDB index hint fails, which
# has no counterpart here: no path of ours writes one, so no scenario can.
WRITTEN_ACTIONS = sorted(set(shapes.ACTIONS) - {"log_message"})


@pytest.mark.parametrize("action", WRITTEN_ACTIONS)
def test_actions_have_the_reference_shape(world: World, action: str) -> None:
    reply = world.client.post("/api/actions", json={"action": action})
    assert reply.status_code == 200, reply.text
    listed = reply.json()
    assert listed, f"the scenario wrote no {action} action"
    for index, entry in enumerate(listed):
        assert entry["action"] == action
        assert_shape(entry, shapes.ACTIONS[action], f"{action}[{index}]")


def test_every_action_the_scenario_wrote_has_a_reference_shape(world: World) -> None:
    # Arbiter's own action types (a book upload, a refused signup) have no
    # reference shape; every other must be one the reference knows.
    ours = {"upload_book", "reject_user"}
    written = {entry["action"] for entry in all_actions(world)}
    assert written - ours <= set(shapes.ACTIONS)
    assert {"new_run", "approve_run", "finished_run", "stop_run", "failed_task"} <= written
    assert {"dead_task", "purge_run", "modify_run", "delete_run", "worker_log"} <= written
    assert {"block_worker", "block_user", "accept_user", "upload_nn", "crash_or_time"} <= written


def test_a_task_completed_with_crashes_logs_crash_or_time(world: World) -> None:
    run_id, task_id = world.tasks["purged"]
    logged = [
        (a["action"], a.get("task_id")) for a in all_actions(world) if a.get("run_id") == run_id
    ]
    assert ("crash_or_time", task_id) in logged


def test_actions_by_run_keep_the_reference_shape(world: World) -> None:
    run_id = world.runs["stopped"]
    reply = world.client.post("/api/actions", json={"run_id": run_id})
    assert reply.status_code == 200, reply.text
    listed = reply.json()
    assert {entry["run_id"] for entry in listed} == {run_id}
    for entry in listed:
        assert_shape(entry, shapes.ACTIONS[entry["action"]], entry["action"])


# ---------------------------------------------------------------- worker replies

REPLIES = {
    "request_version": shapes.REQUEST_VERSION,
    "request_task": shapes.REQUEST_TASK,
    "no_task": shapes.NO_TASK,
    "blocked_task": shapes.NO_TASK,
    "update_task": shapes.TASK_ALIVE,
    "update_task_finishing": shapes.TASK_ALIVE,
    "update_task_inactive": shapes.TASK_ALIVE,
    "beat": shapes.TASK_ALIVE,
    "beat_inactive": shapes.TASK_ALIVE,
    "request_spsa": shapes.REQUEST_SPSA,
    "failed_task": shapes.DONE,
    "failed_task_again": shapes.TASK_ALIVE,
    "stop_run": shapes.DONE,
    "worker_log": shapes.DONE,
    "worker_log_plain": shapes.DONE,
    "upload_pgn": shapes.DONE,
}


@pytest.mark.parametrize("name", sorted(REPLIES))
def test_worker_replies_have_the_reference_shape(world: World, name: str) -> None:
    reply = world.replies[name]
    assert "status" not in reply, reply  # every one of these is a 200
    assert_shape(reply, REPLIES[name], name)


def test_worker_replies_say_what_the_reference_says(world: World) -> None:
    replies = world.replies
    assert replies["request_version"]["version"] == 325
    assert (replies["update_task"]["task_alive"], replies["beat"]["task_alive"]) == (True, True)
    assert replies["update_task_finishing"]["task_alive"] is False
    assert replies["no_task"]["task_waiting"] is False
    assert "error" in replies["blocked_task"]
    for name in ("failed_task_again", "beat_inactive", "update_task_inactive"):
        assert (replies[name]["task_alive"], "info" in replies[name]) == (False, True), name
    spsa = replies["request_spsa"]
    assert len(spsa["w_params"]) == len(spsa["b_params"]) == 1
    assert spsa["task_alive"] is True


def test_a_refused_stop_is_a_401_error(world: World) -> None:
    reply = dict(world.replies["stop_run_refused"])
    assert reply.pop("status") == 401
    assert_shape(reply, shapes.ERROR, "stop_run refused")
