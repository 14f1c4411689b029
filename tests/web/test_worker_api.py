"""The worker protocol end to end in-process, on both backends (reference 1.1,
1.2 and the reference's test_api.py).

For the nine endpoints: the exact reply shape (always with `duration`); bad
credentials (401 everywhere); malformed, incomplete and mistyped bodies (400
naming the field); unknown runs and tasks and another worker's task (400); the
scheduler's refusals (200 + `error`); the rules of result ingestion. Every
refusal is checked to change nothing (`unchanged`); where the reference does
change something on a refusal (a killed task, a refused stop_run), exactly that
is checked. upload_pgn's storage is tested in test_files_api.py.
"""

import copy as copy_module
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from arbiter.domain.runs.ingest import STOP_RUN_CPU_HOURS
from arbiter.domain.runs.scheduler import TOO_BUSY
from arbiter.domain.workers import WorkerBlocks
from arbiter.protocol import WORKER_PATHS, WORKER_VERSION
from arbiter.protocol.messages import Stats
from arbiter.web import worker_api
from arbiter.web.worker_api import MACHINE_LIMIT_PAUSE, OVER_SHARE_PAUSE, ROOM_PATIENCE
from tests.domain.runs.support import pairs
from tests.jobs.support import wait_until
from tests.web.api_support import (
    PGN,
    actions,
    add_user,
    api_with_users,
    approved,
    post,
    stored_run,
    stored_task,
    take_task,
    unchanged,
    user,
    wire,
    worker_body,
    worker_info,
)
from tests.web.support import STRONG_PASSWORD, state

TASK_PATHS = (
    "/api/update_task",
    "/api/beat",
    "/api/request_spsa",
    "/api/failed_task",
    "/api/stop_run",
    "/api/upload_pgn",
)
# Where a task is named by run_id and task_id and looked up (upload_pgn's
# lookups belong to its own tests).
LOOKUP_PATHS = (*TASK_PATHS[:-1], "/api/worker_log")
NO_RUN = "0" * 24
SPSA = {"raw_params": "Tempo,20,0,50,5,0.002\nAspiration,10,1,40,2,0.002"}


@pytest.fixture
def api(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app on each backend with alice (a tester) and root (an approver)."""
    with api_with_users(tmp_path, database_url, monkeypatch) as client:
        yield client


def start_task(client: TestClient, repo_url: str) -> tuple[str, int]:
    """An approved fixed-games run of alice's; her worker `abcd` holds task 0 (232 games)."""
    run_id = approved(client, repo_url, num_games=2000)
    return run_id, int(take_task(client)["task_id"])


@pytest.fixture
def task(api: TestClient, repo_url: str) -> tuple[str, int]:
    return start_task(api, repo_url)


@pytest.fixture
def lite_task(lite: TestClient, repo_url: str) -> tuple[str, int]:
    return start_task(lite, repo_url)


def body_for(path: str, run_id: str, task_id: int, /, **overrides: Any) -> dict[str, Any]:
    """A valid body for `path` about task `run_id/task_id`, then `overrides`."""
    if path == "/api/request_version":
        body = {"password": STRONG_PASSWORD, "worker_info": {"username": "alice"}}
        return {**body, **overrides}
    extras: dict[str, dict[str, Any]] = {
        "/api/request_task": {},
        "/api/update_task": {"stats": wire(pairs(ld=1, wd=1))},
        "/api/beat": {},
        "/api/request_spsa": {},
        "/api/failed_task": {"message": "engine crashed"},
        "/api/stop_run": {"message": "wrong bench"},
        "/api/upload_pgn": {"pgn": PGN},
        "/api/worker_log": {"message": "hello"},
    }
    extra = dict(extras[path])
    if path not in ("/api/request_task", "/api/worker_log"):
        extra.update(run_id=run_id, task_id=task_id)
    return {**worker_body(**extra), **overrides}


DELETE = object()


def edited(body: dict[str, Any], dotted: str, value: Any = DELETE) -> dict[str, Any]:
    """A copy of `body` with the field at `dotted` (e.g. worker_info.nps) set or deleted."""
    copy = copy_module.deepcopy(body)
    *parents, name = dotted.split(".")
    target = copy
    for parent in parents:
        target = target[parent]
    if value is DELETE:
        del target[name]
    else:
        target[name] = value
    return copy


def run_view(client: TestClient, run_id: str) -> dict[str, Any]:
    reply = client.get(f"/api/get_run/{run_id}")
    assert reply.status_code == 200, reply.text
    view: dict[str, Any] = reply.json()
    return view


# ---------------------------------------------------------------- replies that work


def test_the_snapshot_sees_a_change(api: TestClient, task: tuple[str, int]) -> None:
    """`unchanged` guards every refusal below, so it must itself catch a change."""
    body = body_for("/api/update_task", *task)
    with pytest.raises(AssertionError, match="stored rows changed"), unchanged(api):
        post(api, "/api/update_task", body)


def test_request_version_answers_the_protocol_version(api: TestClient) -> None:
    with unchanged(api):
        status, reply = post(api, "/api/request_version", body_for("/api/request_version", "", 0))
    assert status == 200
    assert set(reply) == {"version", "duration"}
    assert reply["version"] == WORKER_VERSION


def test_request_task_without_work_is_task_waiting_false(api: TestClient) -> None:
    with unchanged(api):
        status, reply = post(api, "/api/request_task", worker_body())
    assert status == 200
    assert set(reply) == {"task_waiting", "duration"}
    assert reply["task_waiting"] is False


def test_request_task_hands_out_a_task_with_its_run(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000, arch_filter="x86-64")
    reply = take_task(api)
    assert set(reply) == {"run", "task_id", "duration"}
    assert reply["task_id"] == 0
    run = reply["run"]
    assert set(run) == {"_id", "args", "my_task"}
    assert run["_id"] == run_id
    args = run["args"]
    reference_args = {
        "base_tag", "new_tag", "tests_repo", "resolved_base", "resolved_new", "tc", "new_tc",
        "threads", "book", "book_depth", "num_games", "base_options", "new_options",
        "base_signature", "new_signature", "priority", "throughput", "itp", "info", "username",
        "auto_purge", "adjudication", "arch_filter", "base_nets", "new_nets",
    }  # fmt: skip
    assert reference_args <= set(args)
    assert "compiler" not in args  # the reference sends it only when a run pins one
    # The default book is the catalogue's; its sri in the bare form the official worker checks.
    assert args["book"] == "UHO_Lichess_4852_v1.epd"
    assert args["book_sri"] == "QHAU1P3LurcJr7UTRI7HZCVFsoYBWC3OTsBqZY/FfQA6VQo3MmECWtByB4gVACW5"
    assert "allowed_archs" not in args  # ours, derived from arch_filter
    assert run["my_task"] == {"num_games": 232, "start": 0, "stats": wire(pairs())}
    stored = stored_task(api, run_id, 0)
    assert stored.active
    assert stored.worker_info["remote_addr"] == "testclient"
    assert stored.worker_info["country_code"] == "?"


def test_tasks_get_disjoint_opening_windows(api: TestClient, repo_url: str) -> None:
    approved(api, repo_url, num_games=2000)
    first, second = take_task(api, key="abcd"), take_task(api, key="efgh")
    assert first["run"]["my_task"]["start"] == 0
    assert second["run"]["my_task"]["start"] == first["run"]["my_task"]["num_games"]


def test_update_task_counts_the_results(api: TestClient, task: tuple[str, int]) -> None:
    run_id, task_id = task
    stats = pairs(ld=1, dd=2, wd=3, ww=1)
    status, reply = post(
        api, "/api/update_task", body_for("/api/update_task", *task, stats=wire(stats))
    )
    assert status == 200
    assert reply == {"task_alive": True, "duration": reply["duration"]}
    assert run_view(api, run_id)["results"] == wire(stats)
    assert stored_task(api, run_id, task_id).wins == stats.wins  # committed before the reply


def test_beat_renews_the_lease_and_writes_nothing(api: TestClient, task: tuple[str, int]) -> None:
    registry = state(api).runs.context.registry
    before = registry.lease(*task)
    with unchanged(api):
        status, reply = post(api, "/api/beat", body_for("/api/beat", *task))
    assert status == 200
    assert set(reply) == {"task_alive", "duration"}
    assert reply["task_alive"] is True
    lease = registry.lease(*task)
    assert before is not None
    assert lease is not None
    assert lease >= before


def test_request_spsa_hands_out_a_perturbation(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000, spsa=SPSA)
    task_id = int(take_task(api)["task_id"])
    status, reply = post(api, "/api/request_spsa", body_for("/api/request_spsa", run_id, task_id))
    assert status == 200
    assert set(reply) == {"w_params", "b_params", "sig", "task_alive", "duration"}
    assert reply["task_alive"] is True
    assert [set(p) for p in reply["w_params"]] == [{"name", "value", "c", "R", "flip"}] * 2
    assert [set(p) for p in reply["b_params"]] == [{"name", "value"}] * 2
    assert [p["name"] for p in reply["w_params"]] == ["Tempo", "Aspiration"]
    assert all(p["flip"] in (-1, 1) for p in reply["w_params"])

    spsa = {"wins": 2, "losses": 0, "draws": 0, "num_games": 2, "sig": reply["sig"]}
    update = body_for("/api/update_task", run_id, task_id, stats=wire(pairs(ww=1)), spsa=spsa)
    assert post(api, "/api/update_task", update)[1]["task_alive"] is True
    after = stored_run(api, run_id).args.spsa
    assert after["iter"] == 1
    moved = [p["theta"] for p in after["params"]]
    assert moved != [20.0, 10.0]  # a won pair moves every θ along its flip


def test_failed_task_frees_the_task(api: TestClient, task: tuple[str, int]) -> None:
    run_id, task_id = task
    status, reply = post(api, "/api/failed_task", body_for("/api/failed_task", *task))
    assert status == 200
    assert set(reply) == {"duration"}
    assert not stored_task(api, run_id, task_id).active
    assert stored_run(api, run_id).workers == 0
    logged = actions(api)[0]
    assert (logged["action"], logged["message"], logged["task_id"]) == (
        "failed_task",
        "engine crashed",
        task_id,
    )
    assert logged["worker"] == "alice-4cores-abcd-1234"

    with unchanged(api):
        status, again = post(api, "/api/failed_task", body_for("/api/failed_task", *task))
    assert status == 200
    assert again == {
        "task_alive": False,
        "info": f"task {run_id}/{task_id} is not active",
        "duration": again["duration"],
    }


def test_stop_run_by_a_trusted_worker_fails_the_run(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000)
    task_id = int(take_task(api, "root")["task_id"])  # an approver's worker is trusted
    body = body_for("/api/stop_run", run_id, task_id, worker_info=worker_info("root"))
    status, reply = post(api, "/api/stop_run", body)
    assert status == 200
    assert set(reply) == {"duration"}
    run = stored_run(api, run_id)
    assert (run.finished, run.failed, run.failures, run.workers) == (True, True, 1, 0)
    logged = actions(api)[0]
    assert (logged["action"], logged["username"]) == ("stop_run", "root")
    assert logged["message"] == "wrong bench"


def test_worker_log_records_a_message(api: TestClient, task: tuple[str, int]) -> None:
    run_id, task_id = task
    status, reply = post(api, "/api/worker_log", worker_body(message="nps low"))
    assert (status, set(reply)) == (200, {"duration"})
    status, reply = post(
        api, "/api/worker_log", worker_body(message="on task", run_id=run_id, task_id=task_id)
    )
    assert (status, set(reply)) == (200, {"duration"})
    about_task, plain = actions(api)[:2]
    assert plain["action"] == "worker_log"
    assert plain["message"] == "nps low"
    assert plain["worker"] == "alice-4cores-abcd-1234"
    assert "run_id" not in plain
    assert (about_task["run_id"], about_task["task_id"]) == (run_id, task_id)
    assert about_task["run"].startswith("patch-")


def test_worker_log_is_truncated_to_5120_characters(api: TestClient) -> None:
    post(api, "/api/worker_log", worker_body(message="x" * 6000))
    assert actions(api)[0]["message"] == "x" * 5120


# ---------------------------------------------------------------- credentials and bodies


def test_wrong_password_is_401_everywhere(api: TestClient, task: tuple[str, int]) -> None:
    for path in WORKER_PATHS:  # one app for all nine: each call must change nothing
        with unchanged(api):
            status, reply = post(api, path, body_for(path, *task, password="not her password"))
        assert (status, reply["error"]) == (401, f"{path}: Invalid username or password.")
        # Start the account over: nine failures would be throttled (and audited),
        # which test_password_throttling.py checks.
        state(api).accounts.guard.succeeded("alice", "testclient")  # the client's address


@pytest.mark.parametrize("path", WORKER_PATHS)
def test_unknown_user_is_401_everywhere(
    lite: TestClient, lite_task: tuple[str, int], path: str
) -> None:
    body = body_for(path, *lite_task)
    body["worker_info"] = {**body["worker_info"], "username": "nobody"}
    with unchanged(lite):
        status, reply = post(lite, path, body)
    assert status == 401
    assert reply["error"] == f"{path}: Invalid username or password."


@pytest.mark.parametrize("path", WORKER_PATHS)
def test_blocked_account_is_401_everywhere(
    lite: TestClient, lite_task: tuple[str, int], path: str
) -> None:
    state(lite).accounts.set_blocked("root", "alice", True)
    with unchanged(lite):
        status, reply = post(lite, path, body_for(path, *lite_task))
    assert status == 401
    assert reply["error"] == f"{path}: Your account is blocked."


@pytest.mark.parametrize("path", WORKER_PATHS)
def test_a_body_that_is_no_json_object_is_400(
    lite: TestClient, lite_task: tuple[str, int], path: str
) -> None:
    for content, problem in [
        (b"{not json", "request is not json encoded"),
        (b"[1, 2]", "request body must be a JSON object"),
    ]:
        with unchanged(lite):
            reply = lite.post(path, content=content, headers={"content-type": "application/json"})
        assert reply.status_code == 400
        payload = reply.json()
        assert set(payload) == {"error", "duration"}
        assert payload["error"].startswith(f"{path}: {problem}")


MISSING = [
    *[
        (path, field)
        for path in WORKER_PATHS
        if path != "/api/request_version"
        for field in ("password", "worker_info.unique_key")
    ],
    ("/api/request_task", "worker_info"),
    ("/api/request_version", "password"),
    ("/api/request_version", "worker_info.username"),
    *[(path, field) for path in TASK_PATHS for field in ("run_id", "task_id")],
    ("/api/update_task", "stats"),
    ("/api/update_task", "stats.pentanomial"),
    ("/api/stop_run", "message"),
    ("/api/upload_pgn", "pgn"),
    ("/api/worker_log", "message"),
]


@pytest.mark.parametrize(("path", "field"), MISSING)
def test_a_missing_field_is_400_naming_it(
    lite: TestClient, lite_task: tuple[str, int], path: str, field: str
) -> None:
    with unchanged(lite):
        status, reply = post(lite, path, edited(body_for(path, *lite_task), field))
    assert status == 400
    assert reply["error"] == f"{path}: {field}: missing required field"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"run_id": NO_RUN}, "task_id: required when run_id is given"),
        ({"task_id": 0}, "run_id: required when task_id is given"),
    ],
)
def test_worker_log_names_a_task_by_both_ids(
    lite: TestClient, fields: dict[str, Any], message: str
) -> None:
    with unchanged(lite):
        status, reply = post(lite, "/api/worker_log", worker_body(message="hi", **fields))
    assert status == 400
    assert reply["error"] == f"/api/worker_log: {message}"


WRONG = [
    ("password", None),
    ("worker_info.concurrency", "4"),
    ("worker_info.concurrency", 0),
    ("worker_info.max_memory", -1),
    ("worker_info.min_threads", 1.5),
    ("worker_info.modified", 1),
    ("worker_info.unique_key", "not-a-key"),
    ("worker_info.username", "a b"),
    ("worker_info.compiler", "icc"),
    ("worker_info.python_version", [3, 11]),
    ("worker_info.architecture", "64bit"),
    ("worker_info.nps", -1.0),
    ("worker_info.nps", 1e13),
    ("worker_info.near_github_api_limit", "no"),
    ("run_id", "xyz"),
    ("run_id", 12),
    ("task_id", -1),
    ("task_id", "0"),
    ("task_id", True),
    ("task_id", 2**31),
    ("stats.wins", -1),
    ("stats.wins", 1.5),
    ("stats.pentanomial", [0, 0, 0, 0]),
    ("stats", [0, 0, 0]),
    ("spsa", {"wins": 1, "losses": 0, "draws": 0, "num_games": 1, "sig": 0}),
    ("spsa", {"wins": 1, "losses": 0, "draws": 0, "num_games": 2, "sig": 0}),
    ("spsa", {"wins": 2, "losses": 0, "draws": 0, "num_games": 2, "sig": -1}),
]


@pytest.mark.parametrize(("field", "value"), WRONG)
def test_a_wrong_type_or_value_is_400_naming_the_field(
    lite: TestClient, lite_task: tuple[str, int], field: str, value: Any
) -> None:
    body = edited(body_for("/api/update_task", *lite_task), field, value)
    with unchanged(lite):
        status, reply = post(lite, "/api/update_task", body)
    assert status == 400
    assert reply["error"].startswith(f"/api/update_task: {field}"), reply


@pytest.mark.parametrize("path", [p for p in WORKER_PATHS if p != "/api/request_version"])
def test_an_unknown_arch_is_400_showing_the_value(
    lite: TestClient, lite_task: tuple[str, int], path: str
) -> None:
    body = body_for(path, *lite_task)
    body["worker_info"] = {**body["worker_info"], "worker_arch": "x86-64-quantum"}
    with unchanged(lite):
        status, reply = post(lite, path, body)
    assert status == 400
    assert reply["error"].startswith(f"{path}: worker_info.worker_arch:")
    assert "x86-64-quantum" in reply["error"]


def test_a_number_out_of_range_is_400(lite: TestClient, lite_task: tuple[str, int]) -> None:
    body = body_for("/api/beat", *lite_task)
    body["worker_info"] = {**body["worker_info"], "nps": "INFINITY"}
    content = json.dumps(body).replace('"INFINITY"', "1e999").encode()  # no float holds it
    with unchanged(lite):
        reply = lite.post(
            "/api/beat", content=content, headers={"content-type": "application/json"}
        )
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("/api/beat: request is not json encoded")


# ---------------------------------------------------------------- runs and tasks that do not fit


def test_an_unknown_run_or_task_is_400(api: TestClient, task: tuple[str, int]) -> None:
    run_id, _ = task
    for path in LOOKUP_PATHS:
        with unchanged(api):
            status, reply = post(api, path, body_for(path, NO_RUN, 0, run_id=NO_RUN, task_id=0))
        assert (status, reply["error"]) == (400, f"{path}: Invalid run_id: {NO_RUN}")
        with unchanged(api):
            status, reply = post(api, path, body_for(path, run_id, 7, run_id=run_id, task_id=7))
        assert (status, reply["error"]) == (400, f"{path}: Invalid task_id 7 for run {run_id}")


@pytest.mark.parametrize(
    ("other", "finished"),
    [("process", False), ("user", False), ("process", True)],
    ids=["other-process", "other-user", "finished-run"],
)
def test_another_workers_task_is_400(
    api: TestClient, task: tuple[str, int], other: str, finished: bool
) -> None:
    """Another process of the same user (other unique_key) or another user with the
    same key: the task is not theirs, whether its run is live or finished."""
    run_id, task_id = task
    if finished:
        state(api).runs.lifecycle.stop(user(api, "alice"), run_id)
    add_user(api, "bob")
    info = worker_info("alice", "efgh") if other == "process" else worker_info("bob", "abcd")
    for path in LOOKUP_PATHS:
        body = body_for(path, run_id, task_id, run_id=run_id, task_id=task_id, worker_info=info)
        with unchanged(api):
            status, reply = post(api, path, body)
        expected = f"{path}: Invalid unique_key for task {run_id}/{task_id}"
        assert (status, reply["error"]) == (400, expected)


def test_request_spsa_on_a_run_without_spsa_is_400(api: TestClient, task: tuple[str, int]) -> None:
    with unchanged(api):
        status, reply = post(api, "/api/request_spsa", body_for("/api/request_spsa", *task))
    assert status == 400
    assert reply["error"] == f"/api/request_spsa: Run {task[0]} is not an SPSA run"


# ---------------------------------------------------------------- the scheduler's refusals


def test_a_blocked_worker_gets_an_error_and_no_task(api: TestClient, repo_url: str) -> None:
    approved(api, repo_url, num_games=2000)
    changed = state(api).runs.blocked_machines.forget
    WorkerBlocks(state(api).storage, changed).set_blocked(
        user(api, "root"), "alice-4cores-abcd", blocked=True, message="bad results"
    )
    with unchanged(api):
        status, reply = post(api, "/api/request_task", worker_body())
    assert status == 200
    assert set(reply) == {"task_waiting", "error", "duration"}
    assert reply["task_waiting"] is False
    assert "has been blocked: bad results" in reply["error"]
    assert "/workers/alice-4cores-abcd" in reply["error"]
    # Another machine of the same user is not blocked.
    assert "task_id" in take_task(api, key="efgh")


def test_a_second_worker_with_the_same_name_is_refused(
    api: TestClient, task: tuple[str, int]
) -> None:
    """Same short name (user, cores, first key group), another process, while the
    first one still reports: a duplicate."""
    info = worker_info(unique_key="abcd-1111-2222-3333-444455556666")
    with unchanged(api):
        status, reply = post(api, "/api/request_task", worker_body(info=info))
    assert status == 200
    assert set(reply) == {"task_waiting", "error", "duration"}
    assert reply["error"].startswith(
        "There is already a worker running with name alice-4cores-abcd"
    )


def test_the_machine_limit_caps_tasks_per_address(api: TestClient, repo_url: str) -> None:
    approved(api, repo_url, num_games=60000)
    limit = user(api, "alice").machine_limit
    assert limit == 16
    for index in range(limit):
        take_task(api, key=f"m{index:02d}")
    with unchanged(api):
        status, reply = post(api, "/api/request_task", worker_body(key="m99"))
    assert status == 200
    assert reply == {
        "task_waiting": False,
        "error": "Machine limit reached for user alice.",
        "duration": reply["duration"],
    }
    # Refused after a pause, so a client re-sending at once cannot flood the core.
    assert reply["duration"] >= MACHINE_LIMIT_PAUSE
    add_user(api, "bob")
    started = time.monotonic()
    assert "task_id" in take_task(api, "bob", key="m99")  # the limit is per user
    assert time.monotonic() - started < MACHINE_LIMIT_PAUSE  # and so is the pause


def request_task_while_a_place_comes_back(
    api: TestClient, in_line: Callable[[], bool], give_back: Callable[[], None]
) -> tuple[int, dict[str, Any]]:
    """POST a request_task while another thread gives a gate place back once the
    call waits in line for one (`in_line`): the call may take a while to reach
    the gate, since its password is checked first."""

    def give_back_once_in_line() -> None:
        wait_until(in_line)
        give_back()

    thread = threading.Thread(target=give_back_once_in_line)
    thread.start()
    try:
        return post(api, "/api/request_task", worker_body(key="efgh"))
    finally:
        thread.join()


def test_a_full_admission_gate_is_too_busy_after_a_brief_wait(
    api: TestClient, task: tuple[str, int]
) -> None:
    """Nobody gives a place back (held outside the gate): the call waits its short
    patience for one, then gets the reference's "too busy", far sooner than a
    call past its account's share."""
    gate: threading.Semaphore = state(api).task_semaphore
    size = state(api).settings.task_semaphore_size
    for _ in range(size):
        assert gate.acquire(blocking=False)
    try:
        with unchanged(api):
            status, reply = post(api, "/api/request_task", worker_body(key="efgh"))
    finally:
        for _ in range(size):
            gate.release()
    assert status == 200
    assert reply == {"task_waiting": False, "info": TOO_BUSY, "duration": reply["duration"]}
    assert ROOM_PATIENCE <= reply["duration"] < OVER_SHARE_PAUSE  # no account's fault


def test_a_call_at_a_full_gate_gets_the_place_given_back_meanwhile(
    api: TestClient, task: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate is full of other accounts' calls; one is decided while this call
    waits for room, and its place is this call's: a task instead of "too busy"."""
    # Patience enough for a busy test machine to give the place back in time.
    monkeypatch.setattr(worker_api, "ROOM_PATIENCE", 30.0)
    scheduler = state(api).runs.scheduler
    size = state(api).settings.task_semaphore_size
    alice = user(api, "alice")
    holders = [f"holder{n}" for n in range(size)]
    for name in holders:
        assert scheduler.admit(replace(alice, username=name))

    try:
        status, reply = request_task_while_a_place_comes_back(
            api,
            in_line=lambda: len(scheduler._gate._waiting_for_room) == 1,
            give_back=lambda: scheduler._gate.leave(holders[0]),
        )
    finally:
        for name in holders[1:]:
            scheduler._gate.leave(name)
    assert status == 200
    assert "task_id" in reply
    assert scheduler.gate_occupied() == 0


def test_an_account_beyond_its_share_of_the_gate_is_too_busy(
    api: TestClient, task: tuple[str, int]
) -> None:
    """By default one account holds at most half the gate's places (at least one);
    its next call is told "too busy" as a full gate's is, after a pause that slows
    a flood down, and others still get in."""
    size = state(api).settings.task_semaphore_size
    scheduler = state(api).runs.scheduler
    alice = user(api, "alice")
    held = 0
    while scheduler.admit(replace(alice, username="ALICE")):  # spelling does not matter
        held += 1
    assert held == max(1, size // 2)
    try:
        with unchanged(api):
            status, reply = post(api, "/api/request_task", worker_body(key="efgh"))
        assert status == 200
        assert reply == {"task_waiting": False, "info": TOO_BUSY, "duration": reply["duration"]}
        assert reply["duration"] >= OVER_SHARE_PAUSE
        add_user(api, "bob")
        assert "task_id" in take_task(api, "bob", key="ijkl")
    finally:
        for _ in range(held):
            scheduler._gate.leave("alice")


def test_a_call_past_its_share_gets_the_place_its_account_gives_back(
    api: TestClient, task: tuple[str, int]
) -> None:
    """A burst of one account's calls is not refused while the gate has room: the
    call past the share waits for the account's next free place."""
    scheduler = state(api).runs.scheduler
    alice = user(api, "alice")
    held = 0
    while scheduler.admit(alice):
        held += 1

    def give_back() -> None:
        time.sleep(0.2)
        scheduler._gate.leave("alice")

    try:
        status, reply = request_task_while_a_place_comes_back(
            api, in_line=lambda: "alice" in scheduler._gate._waiting, give_back=give_back
        )
    finally:
        for _ in range(held - 1):
            scheduler._gate.leave("alice")
    assert status == 200
    assert "task_id" in reply
    assert 0.2 <= reply["duration"] < OVER_SHARE_PAUSE
    assert scheduler.gate_occupied() == 0


# ---------------------------------------------------------------- stop_run


def test_stop_run_needs_cpu_hours(api: TestClient, task: tuple[str, int]) -> None:
    """The reference's rule: the refusal is a 401, the run goes on, the task is
    taken away and the attempt is logged."""
    run_id, task_id = task
    assert state(api).runs.cpu_hours("alice") < STOP_RUN_CPU_HOURS
    before = stored_run(api, run_id)
    status, reply = post(api, "/api/stop_run", body_for("/api/stop_run", *task))
    assert status == 401
    assert reply["error"] == (
        f"/api/stop_run: User alice has too few CPU hours to stop run {run_id}."
    )
    after = stored_run(api, run_id)
    assert not after.finished
    assert not after.failed
    assert (before.workers, after.workers) == (1, 0)
    assert not stored_task(api, run_id, task_id).active
    logged = actions(api)[0]
    assert (logged["action"], logged["message"]) == ("stop_run", "wrong bench (not authorized)")


def test_stop_run_on_a_finished_run_is_401(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=2000)
    task_id = int(take_task(api, "root")["task_id"])
    state(api).runs.lifecycle.stop(user(api, "alice"), run_id)
    body = body_for("/api/stop_run", run_id, task_id, worker_info=worker_info("root"))
    with unchanged(api):
        status, reply = post(api, "/api/stop_run", body)
    assert status == 401
    assert reply["error"] == f"/api/stop_run: Run {run_id} is already finished."


# ---------------------------------------------------------------- update_task


def update(client: TestClient, task: tuple[str, int], stats: Stats) -> dict[str, Any]:
    status, reply = post(
        client, "/api/update_task", body_for("/api/update_task", *task, stats=wire(stats))
    )
    assert status == 200, reply
    return reply


def test_a_run_with_results_hands_out_tasks_without_its_chart_history(
    api: TestClient, task: tuple[str, int]
) -> None:
    update(api, task, pairs(ld=2, dd=3, wd=1))
    assert state(api).runs.queries.run(task[0]).results_history  # ours, for the charts
    args = take_task(api, key="efgh")["run"]["args"]
    assert "results_history" not in args  # not the reference's shape
    assert "allowed_archs" not in args


def test_a_repeated_identical_update_changes_nothing(
    api: TestClient, task: tuple[str, int]
) -> None:
    stats = pairs(ld=2, dd=3, wd=1)
    assert update(api, task, stats)["task_alive"] is True
    with unchanged(api):
        again = update(api, task, stats)
    assert again == {"task_alive": True, "duration": again["duration"]}


@pytest.mark.parametrize(
    ("stats", "problem"),
    [
        (pairs(ld=1, wd=1), "a cumulative count went down"),
        (Stats(3, 2, 229, 6, 0, [0, 1, 114, 2, 0]), "234 games played in a task of 232"),
        (Stats(3, 2, 5, 5, 0, [0, 1, 2, 2, 0]), "a cumulative count went down"),
    ],
    ids=["decreasing", "too-many", "fewer-crashes"],
)
def test_stats_that_cannot_follow_the_stored_ones_kill_the_task(
    api: TestClient, task: tuple[str, int], stats: Stats, problem: str
) -> None:
    """The reference answers 200 + error, deactivates the task and counts nothing."""
    run_id, task_id = task
    first = Stats(3, 2, 5, 6, 0, [0, 1, 2, 2, 0])  # LD, DD, WL, WD, WD; crashes only go up
    assert update(api, task, first)["task_alive"] is True
    reply = update(api, task, stats)
    assert set(reply) == {"task_alive", "error", "duration"}
    assert reply["task_alive"] is False
    assert reply["error"].startswith(f"{run_id}/{task_id}: incompatible stats: ")
    assert problem in reply["error"]
    assert run_view(api, run_id)["results"] == wire(first)
    assert not stored_task(api, run_id, task_id).active
    logged = actions(api)[0]
    assert (logged["action"], logged["task_id"]) == ("failed_task", task_id)
    assert problem in logged["message"]

    with unchanged(api):  # a dead task takes no more results
        dead = update(api, task, first)
    assert dead["task_alive"] is False
    assert dead["info"] == f"task {run_id}/{task_id} is not active"


@pytest.mark.parametrize(
    ("stats", "problem"),
    [
        (Stats(4, 2, 5, 6, 0, [0, 1, 2, 2, 0]), "odd number of games (11)"),
        (Stats(5, 1, 4, 6, 0, [0, 1, 2, 2, 0]), "wins-losses = 4 but the pentanomial implies"),
        (Stats(3, 2, 7, 6, 0, [0, 1, 2, 2, 0]), "wins+losses+draws = 12 games"),
        (Stats(2, 2, 0, 0, 0, [0, 1, 0, 1, 0]), "draws = 0 is outside the range"),
    ],
    ids=["odd", "wins-losses", "games-vs-pairs", "draws"],
)
def test_contradictory_stats_are_a_bad_request_and_the_task_lives_on(
    api: TestClient, task: tuple[str, int], stats: Stats, problem: str
) -> None:
    """The reference's request schema refuses counts that contradict each other
    (valid_results): a 400 before the run is touched, so the task stays active."""
    first = pairs(ld=1, dd=2, wd=2)
    assert update(api, task, first)["task_alive"] is True
    body = body_for("/api/update_task", *task, stats=wire(stats))
    with unchanged(api):
        status, reply = post(api, "/api/update_task", body)
    assert status == 400
    assert reply["error"].startswith("/api/update_task: incompatible stats: ")
    assert problem in reply["error"]
    assert stored_task(api, *task).active
    again = update(api, task, pairs(ld=1, dd=3, wd=2))  # the worker may go on
    assert again["task_alive"] is True


def test_stats_off_the_sprt_batch_kill_the_task(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, sprt={"elo0": 0, "elo1": 2})
    task = (run_id, int(take_task(api)["task_id"]))
    batch = int(stored_run(api, run_id).args.sprt["batch_size"])
    assert batch == 16
    assert update(api, task, pairs(dd=batch))["task_alive"] is True
    reply = update(api, task, pairs(dd=batch + 1))
    assert reply["task_alive"] is False
    assert "incompatible with the SPRT batch size of 16 pairs" in reply["error"]
    assert run_view(api, run_id)["results"] == wire(pairs(dd=batch))


def test_a_complete_task_is_no_longer_alive(api: TestClient, task: tuple[str, int]) -> None:
    run_id, task_id = task
    reply = update(api, task, pairs(dd=116))  # all 232 games of the task
    assert reply == {"task_alive": False, "duration": reply["duration"]}
    assert not stored_task(api, run_id, task_id).active
    assert not stored_run(api, run_id).finished  # the run wants 2000 games


def test_a_task_completed_after_crashes_logs_crash_or_time(
    api: TestClient, task: tuple[str, int]
) -> None:
    """As the reference's update_task: the completing update is logged like a failure."""
    run_id, task_id = task
    stats = {**wire(pairs(dd=116)), "crashes": 4, "time_losses": 29}
    body = body_for("/api/update_task", *task, stats=stats)
    assert post(api, "/api/update_task", body)[1]["task_alive"] is False
    logged = actions(api)[0]
    assert (logged["action"], logged["run_id"], logged["task_id"]) == (
        "crash_or_time",
        run_id,
        task_id,
    )
    assert logged["message"] == "Time losses:29(12.5%) Crashes:4(1.7%)"
    assert logged["worker"].startswith("alice-4cores-abcd")


def test_the_update_that_finishes_the_run_ends_the_task(api: TestClient, repo_url: str) -> None:
    run_id = approved(api, repo_url, num_games=4)
    task = (run_id, int(take_task(api)["task_id"]))
    assert update(api, task, pairs(ww=1))["task_alive"] is True
    reply = update(api, task, pairs(wd=1, ww=1))
    assert reply == {"task_alive": False, "duration": reply["duration"]}
    view = run_view(api, run_id)
    assert view["finished"] is True
    assert view["workers"] == 0
    assert [a["action"] for a in actions(api)[:1]] == ["finished_run"]


@pytest.mark.parametrize("path", ["/api/update_task", "/api/beat", "/api/request_spsa"])
def test_a_stopped_run_answers_task_alive_false(
    api: TestClient, task: tuple[str, int], path: str
) -> None:
    run_id, task_id = task
    update(api, task, pairs(dd=2))
    state(api).runs.lifecycle.stop(user(api, "alice"), run_id)
    body = body_for(path, *task, stats=wire(pairs(dd=3)))
    with unchanged(api):
        status, reply = post(api, path, body)
    assert status == 200
    assert reply == {
        "task_alive": False,
        "info": f"task {run_id}/{task_id} is not active",
        "duration": reply["duration"],
    }
    assert run_view(api, run_id)["results"] == wire(pairs(dd=2))


# ---------------------------------------------------------------- property: idempotent ingestion

# One report's new game pairs: LL, LD, DD, WL, WD, WW (DD and WL share a pentanomial slot).
increments = st.tuples(*[st.integers(0, 2)] * 6, st.integers(0, 1))
reports = st.lists(st.tuples(increments, st.integers(1, 3)), min_size=1, max_size=8)


def cumulative(steps: list[tuple[tuple[int, ...], int]]) -> list[Stats]:
    """The cumulative stats a worker sends, each repeated as often as drawn."""
    totals = [0] * 7
    sent = []
    for increment, repeats in steps:
        totals = [t + i for t, i in zip(totals, increment, strict=True)]
        ll, ld, dd, wl, wd, ww, crashes = totals
        stats = Stats(
            wins=wd + 2 * ww + wl,
            losses=ld + 2 * ll + wl,
            draws=ld + 2 * dd + wd,
            crashes=crashes,
            time_losses=0,
            pentanomial=[ll, ld, dd + wl, wd, ww],
        )
        sent.extend([stats] * repeats)
    return sent


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=reports)
def test_repeated_cumulative_updates_count_once(
    api: TestClient, repo_url: str, steps: list[tuple[tuple[int, ...], int]]
) -> None:
    """However often each cumulative report arrives, the run's totals are the
    last report's, in memory, in storage and on the wire."""
    run_id = approved(api, repo_url, num_games=2000)
    try:
        task = (run_id, int(take_task(api)["task_id"]))
        sent = cumulative(steps)
        for stats in sent:
            reply = update(api, task, stats)
            assert (set(reply), reply["task_alive"]) == ({"task_alive", "duration"}, True)
        last = wire(sent[-1])
        assert run_view(api, run_id)["results"] == last
        run = stored_run(api, run_id)
        stored = [
            run.wins,
            run.losses,
            run.draws,
            run.crashes,
            run.time_losses,
            list(run.pentanomial),
        ]
        assert stored == list(last.values())
        live = state(api).runs.context.registry.get(run_id)
        assert live is not None
        assert live.run == run
    finally:
        state(api).runs.lifecycle.delete(user(api, "root"), run_id)  # examples share the app
