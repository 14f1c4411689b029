"""Property-based fuzzing of every API operation: never a 5xx, and every 4xx is
JSON `{"error": "<path>: ...", "duration": s}`.

Bodies start from a valid request (real credentials, a live run, the task's
owner) and hypothesis replaces, drops or garbles fields with arbitrary JSON,
so both the boundary checks and the logic behind them are exercised. The app
runs in-process with a real SQLite file. Examples per operation: 50 here,
ARBITER_TEST_FUZZ_EXAMPLES to change it (bench/fuzz.py --long runs 1,000+).
"""

import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from arbiter.runtime.settings import Settings
from arbiter.web.app import create_app
from arbiter.web.replies import is_temporary_worker_refusal
from tests.web.api_support import worker_info as api_worker_info
from tests.web.live_server import PASSWORD

EXAMPLES = int(os.environ.get("ARBITER_TEST_FUZZ_EXAMPLES", "50"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)


@dataclass
class World:
    """A live app with accounts, a run and a task held by a known worker."""

    client: TestClient
    token: str
    approver: str
    run_id: str  # the run whose task 0 `worker` holds
    spare_id: str  # a run the lifecycle operations may stop, purge or delete
    worker: dict[str, Any]
    repo: str


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path, repo_url: str
) -> Iterator[World]:
    data = tmp_path_factory.mktemp("fuzz")
    shutil.copy(sqlite_template, data / "arbiter.sqlite3")
    app_settings = Settings(
        data_dir=data,
        database_url=f"sqlite:///{data / 'arbiter.sqlite3'}",
        secret_key="fuzz",
        argon2_time_cost=1,
        argon2_memory_kib=8,
        jobs=False,
        git_allow="file",
        overload_lag_ms=0,  # the loop shares the test process: see api_settings
    )
    with TestClient(create_app(app_settings), follow_redirects=False) as client:
        accounts = client.app.state.arbiter.accounts  # type: ignore[attr-defined]
        accounts.create_user("alice", PASSWORD)
        accounts.create_user("root", PASSWORD, approver=True)
        token, approver = accounts.create_token("alice", "f"), accounts.create_token("root", "f")
        run = {"tests_repo": repo_url, "new_tag": "patch", "base_tag": "master", "tc": "10+0.1"}
        run_ids = []
        for _ in range(2):
            reply = client.post("/api/runs", json=run, headers=bearer(token))
            run_ids.append(reply.json()["run_id"])
            approve = client.post(f"/api/runs/{run_ids[-1]}/approve", headers=bearer(approver))
            approve.raise_for_status()
        client.post(
            f"/api/runs/{run_ids[1]}/modify", json={"priority": -1}, headers=bearer(approver)
        )
        worker = worker_info()
        reply = client.post("/api/request_task", json={"password": token, "worker_info": worker})
        assert reply.json()["task_id"] == 0, reply.text
        assert reply.json()["run"]["_id"] == run_ids[0], reply.text
        yield World(client, token, approver, run_ids[0], run_ids[1], worker, repo_url)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def worker_info() -> dict[str, Any]:
    return api_worker_info(key="fuzz0001", worker_arch="x86-64-avx2")


# ---------------------------------------------------------------- strategies


def garbled(
    valid: dict[str, Any], fields: dict[str, st.SearchStrategy[Any]], *, top: bool = True
) -> st.SearchStrategy[Any]:
    """`valid`, with some fields replaced (by their own strategy or any JSON) and some
    dropped; sometimes an arbitrary JSON value instead, or raw bytes (`top`: a body)."""
    # Mostly valid fields, so that the logic behind the schema is reached too.
    values = {
        key: st.one_of(*[st.just(value)] * 4, fields.get(key, st.nothing()), JSON_VALUES)
        for key, value in valid.items()
    }
    dicts = st.tuples(st.fixed_dictionaries(values), st.sets(st.sampled_from(sorted(valid))))
    objects = dicts.map(lambda pair: {k: v for k, v in pair[0].items() if k not in pair[1]})
    others = st.one_of(JSON_VALUES, st.binary(max_size=64)) if top else JSON_VALUES
    return st.one_of(objects, objects, objects, others)


def encode(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def small_ints() -> st.SearchStrategy[int]:
    return st.integers(min_value=-3, max_value=2**40) | st.sampled_from([0, 1, 2, 16, 2**31])


def worker_body(world: World, **extra: Any) -> dict[str, Any]:
    return {"password": world.token, "worker_info": world.worker, **extra}


def worker_fields(world: World) -> dict[str, st.SearchStrategy[Any]]:
    info = dict.fromkeys(world.worker, JSON_VALUES)
    info["unique_key"] = st.from_regex(
        r"[0-9a-z]{2,8}(-[a-f0-9]{4}){3}-[a-f0-9]{12}", fullmatch=True
    )
    info["concurrency"] = small_ints()
    return {
        "password": st.sampled_from([world.token, PASSWORD, "arb_" + "0" * 40, ""]),
        "worker_info": st.fixed_dictionaries({k: st.just(v) for k, v in world.worker.items()})
        | garbled(world.worker, info, top=False),
        "run_id": st.sampled_from([world.run_id, "0" * 24]) | st.text(max_size=30),
        "task_id": small_ints(),
        "stats": garbled(
            {
                "wins": 2,
                "losses": 0,
                "draws": 30,
                "crashes": 0,
                "time_losses": 0,
                "pentanomial": [0, 0, 14, 2, 0],
            },
            {"pentanomial": st.lists(small_ints(), max_size=6)}
            | {k: small_ints() for k in ("wins", "losses", "draws", "crashes", "time_losses")},
            top=False,
        ),
        "pgn": st.text(max_size=40) | st.sampled_from(["H4sIAAAAAAAAA0tMTgYAg9uxiQQAAAA="]),
        "message": st.text(max_size=40),
    }


def segment() -> st.SearchStrategy[str]:
    return st.text(max_size=40).map(lambda text: quote(text, safe=""))


def run_segment(world: World) -> st.SearchStrategy[str]:
    return st.sampled_from([world.run_id, "0" * 24]) | segment()


def query() -> st.SearchStrategy[str]:
    keys = st.sampled_from(
        [
            *("page", "username", "timestamp", "success_only", "W", "D", "L", "LL", "LD"),
            *("DDWL", "WD", "WW", "elo0", "elo1", "elo_model", "name"),
        ]
    ) | st.text(max_size=8)
    values = st.text(max_size=12) | small_ints().map(str)
    return st.dictionaries(keys, values, max_size=5).map(urlencode)


# ---------------------------------------------------------------- operations


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


Operation = Callable[[World], st.SearchStrategy[Request]]


def worker_call(path: str, *extra: str) -> Operation:
    def build(world: World) -> st.SearchStrategy[Request]:
        fields = worker_fields(world)
        valid = worker_body(world, **{key: _valid(world, key) for key in extra})
        return garbled(valid, fields).map(lambda body: Request("POST", path, encode(body)))

    return build


def _valid(world: World, key: str) -> Any:
    return {
        "run_id": world.run_id,
        "task_id": 0,
        "stats": {
            "wins": 2,
            "losses": 0,
            "draws": 30,
            "crashes": 0,
            "time_losses": 0,
            "pentanomial": [0, 0, 14, 2, 0],
        },
        "message": "fuzz",
        "pgn": "H4sIAAAAAAAAA0tMTgYAg9uxiQQAAAA=",
    }[key]


def runs_call(action: str) -> Operation:
    def build(world: World) -> st.SearchStrategy[Request]:
        token = st.sampled_from([world.token, world.approver, "arb_bad", ""])
        body = st.one_of(st.just(b""), garbled({"message": "stop"}, {}).map(encode))
        return st.builds(
            lambda run, tok, content: Request(
                "POST", f"/api/runs/{run}/{action}", content, (("authorization", f"Bearer {tok}"),)
            ),
            st.sampled_from([world.spare_id, "0" * 24]) | segment(),
            token,
            body,
        )

    return build


def submit_run(world: World) -> st.SearchStrategy[Request]:
    valid = {
        "tests_repo": world.repo,
        "new_tag": "patch",
        "base_tag": "master",
        "tc": "10+0.1",
        "num_games": 1000,
        "sprt": {"elo0": 0, "elo1": 2},
        "threads": 1,
        "priority": 0,
        "throughput": 100,
        "book": "arbiter-openings-v1.epd",
        "new_options": "Hash=16",
    }
    fields = {
        "tc": st.from_regex(r"[0-9]{1,3}(\.[0-9])?(\+[0-9]\.[0-9]{1,2})?", fullmatch=True),
        "num_games": small_ints(),
        "sprt": garbled({"elo0": 0, "elo1": 2, "alpha": 0.05}, {}, top=False),
        "spsa": garbled({"raw_params": "A,int,10,0,20,2,0.002", "A": 0.1}, {}, top=False),
    }
    auth = (("authorization", f"Bearer {world.token}"),)
    return garbled(valid, fields).map(lambda body: Request("POST", "/api/runs", encode(body), auth))


def get(path: Callable[[World], st.SearchStrategy[str]]) -> Operation:
    return lambda world: st.builds(lambda url: Request("GET", url), path(world))


def upload(path: str) -> Operation:
    def build(world: World) -> st.SearchStrategy[Request]:
        return st.builds(
            lambda name, data, tok: Request(
                "POST", f"{path}?name={name}", data, (("authorization", f"Bearer {tok}"),)
            ),
            st.sampled_from(["nn-000000000000.nnue", "book.epd"]) | segment(),
            st.binary(max_size=200),
            st.sampled_from([world.token, "arb_bad"]),
        )

    return build


def actions(world: World) -> st.SearchStrategy[Request]:
    valid = {"action": "new_run", "username": "alice", "run_id": world.run_id, "max_count": 5}
    fields = {"before": JSON_VALUES, "max_count": small_ints()}
    return garbled(valid, fields).map(lambda body: Request("POST", "/api/actions", encode(body)))


OPERATIONS: dict[str, Operation] = {
    "request_version": worker_call("/api/request_version"),
    "request_task": worker_call("/api/request_task"),
    "update_task": worker_call("/api/update_task", "run_id", "task_id", "stats"),
    "beat": worker_call("/api/beat", "run_id", "task_id"),
    "request_spsa": worker_call("/api/request_spsa", "run_id", "task_id"),
    "failed_task": worker_call("/api/failed_task", "run_id", "task_id", "message"),
    "stop_run (worker)": worker_call("/api/stop_run", "run_id", "task_id", "message"),
    "upload_pgn": worker_call("/api/upload_pgn", "run_id", "task_id", "pgn"),
    "worker_log": worker_call("/api/worker_log", "message"),
    "runs submit": submit_run,
    "runs approve": runs_call("approve"),
    "runs stop": runs_call("stop"),
    "runs modify": runs_call("modify"),
    "runs purge": runs_call("purge"),
    "runs delete": runs_call("delete"),
    "actions": actions,
    "active_runs": get(lambda _w: st.just("/api/active_runs")),
    "finished_runs": get(lambda _w: query().map(lambda q: f"/api/finished_runs?{q}")),
    "calc_elo": get(lambda _w: query().map(lambda q: f"/api/calc_elo?{q}")),
    "get_run": get(lambda w: run_segment(w).map(lambda r: f"/api/get_run/{r}")),
    "get_task": get(
        lambda w: st.builds(
            lambda r, t: f"/api/get_task/{r}/{t}", run_segment(w), segment() | st.just("0")
        )
    ),
    "get_elo": get(lambda w: run_segment(w).map(lambda r: f"/api/get_elo/{r}")),
    "pgn": get(
        lambda w: st.builds(lambda r, t: f"/api/pgn/{r}-{t}.pgn", run_segment(w), segment())
    ),
    "run_pgns": get(lambda w: run_segment(w).map(lambda r: f"/api/run_pgns/{r}.pgn.gz")),
    "nns": get(lambda _w: st.just("/api/nns")),
    "nn": get(lambda _w: segment().map(lambda n: f"/api/nn/{n}")),
    "books": get(lambda _w: st.just("/api/books")),
    "book": get(lambda _w: segment().map(lambda n: f"/api/book/{n}")),
    "upload_net": upload("/api/upload_net"),
    "upload_book": upload("/api/upload_book"),
}


def check(request: Request, status: int, content_type: str, body: bytes) -> None:
    assert status < 500, (request, status, body[:300])
    if 400 <= status < 500:
        assert content_type == "application/json", (request, status, content_type)
        payload = json.loads(body)
        if is_temporary_worker_refusal(request.url.split("?")[0], status):
            # A worker call refused for now (guesses at this account from this
            # address throttle it too) is a JSON string: the official worker
            # retries that, and takes an object with `error` as final.
            assert isinstance(payload, str), (request, payload)
            assert payload.startswith("/api"), (request, payload)
            return
        assert set(payload) == {"error", "duration"}, (request, payload)
        # Prefixed with the path the server saw: the client resolves dot segments,
        # so a generated "/api/nn/.." arrives as "/api".
        assert payload["error"].startswith("/api"), (request, payload)


def send(world: World, request: Request) -> int:
    reply = world.client.request(
        request.method, request.url, content=request.body, headers=dict(request.headers)
    )
    check(request, reply.status_code, reply.headers.get("content-type", ""), reply.content)
    return reply.status_code


# Hypothesis describes these big strategies at length when it reports a failure.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_fuzz_operation(world: World, name: str) -> None:
    statuses: Counter[int] = Counter()

    @FUZZ
    @given(OPERATIONS[name](world))
    def fuzz(request: Request) -> None:
        statuses[send(world, request)] += 1

    fuzz()
    print(f"{name}: {dict(sorted(statuses.items()))}")  # bench/fuzz.py --long shows these


POST_PATHS = sorted(
    {"/api/runs", "/api/actions", "/api/upload_net", "/api/upload_book"}
    | {f"/api/{name}" for name in ("request_version", "request_task", "update_task", "beat")}
    | {f"/api/{name}" for name in ("request_spsa", "failed_task", "stop_run", "upload_pgn")}
    | {"/api/worker_log", "/api/runs/0123456789abcdef01234567/stop"}
)


@pytest.mark.parametrize("path", POST_PATHS)
def test_oversized_bodies_are_413_before_reading(world: World, path: str) -> None:
    # Declared far over every limit (2 MiB API, 200 MiB uploads); nothing is sent.
    headers = {"content-length": str(10**12), **bearer(world.token)}
    reply = world.client.post(path, content=b"{}", headers=headers)
    check(Request("POST", path), reply.status_code, reply.headers["content-type"], reply.content)
    assert reply.status_code == 413


@pytest.mark.parametrize("path", [p for p in POST_PATHS if "upload_" not in p[5:12]])
def test_deeply_nested_json_is_rejected_fast(world: World, path: str) -> None:
    depth = 300_000  # up to 1.8 MB of nesting: under the 2 MiB body limit
    for nested in (b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth):
        started = time.perf_counter()
        reply = world.client.post(path, content=nested, headers=bearer(world.token))
        elapsed = time.perf_counter() - started
        check(
            Request("POST", path), reply.status_code, reply.headers["content-type"], reply.content
        )
        assert reply.status_code in (400, 401), reply.text
        assert elapsed < 1.0, elapsed  # the decoder gives up at its depth limit
