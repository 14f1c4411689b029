"""Seed 004's lesson for git: 200 submissions whose repository host
accepts connections and never answers, on a real `arbiter serve`, while pages,
logins and worker calls keep answering, long before git's timeout.

The server gets fewer request threads (20) than the git work it holds (32
submissions waiting on the tarpit: the half of its 64 git threads that
accounts with a read in flight may fill, the rest being kept for accounts
with none): if git ran in the request threadpool, the pages below would wait
for the git timeout. The other 168 submissions are refused at once by the
caps, with a Retry-After."""

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from tests import fresh_loop
from tests.domain.repos.support import Tarpit
from tests.web.live_server import (
    PASSWORD,
    Server,
    create_token,
    create_user,
    start_server,
    stop,
)

ACCOUNTS = ("ann", "bob", "cat", "dan", "eve")
SUBMISSIONS = 200
GIT_TIMEOUT = 12
SERVER_ENV = {
    "ARBITER_GIT_ALLOW": "127.0.0.0/8",
    "ARBITER_GIT_THREADS": "64",
    "ARBITER_GIT_PER_ACCOUNT": "8",
    "ARBITER_GIT_TIMEOUT_SECONDS": str(GIT_TIMEOUT),
    "ARBITER_THREADPOOL_TOKENS": "20",
    "ARBITER_TASK_SEMAPHORE_SIZE": "5",
    "ARBITER_JOBS": "0",
}


@pytest.fixture
def tarpit() -> Iterator[Tarpit]:
    pit = Tarpit()
    yield pit
    pit.close()


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[Server]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name in ACCOUNTS:
        create_user(data, name, database_url)
    running = start_server(data, database_url, extra_env=SERVER_ENV)
    yield running
    stop(running)


def log_in(client: httpx.Client) -> float:
    """Seconds for a whole login: the form (its CSRF token), then the post."""
    started = time.monotonic()
    page = client.get("/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token is not None
    form = {"username": "ann", "password": PASSWORD, "csrf_token": token.group(1)}
    reply = client.post("/login", data=form)
    assert reply.status_code == 303, reply.text
    return time.monotonic() - started


def latencies(server: Server, rounds: int) -> dict[str, list[float]]:
    """The seconds each kind of call takes, `rounds` times."""
    found: dict[str, list[float]] = {"page": [], "login": [], "worker": []}
    body = {"password": PASSWORD, "worker_info": {"username": "bob"}}
    for _ in range(rounds):
        with httpx.Client(base_url=server.url, timeout=60) as client:
            started = time.monotonic()
            assert client.get("/tests").status_code == 200
            found["page"].append(time.monotonic() - started)
            found["login"].append(log_in(client))
            started = time.monotonic()
            assert client.post("/api/request_version", json=body).status_code == 200
            found["worker"].append(time.monotonic() - started)
    return found


async def submit_all(server: Server, tokens: dict[str, str], url: str) -> list[httpx.Response]:
    run = {"tests_repo": url, "new_tag": "patch", "base_tag": "master", "tc": "10+0.1"}
    limits = httpx.Limits(max_connections=SUBMISSIONS)
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
        calls = [
            client.post(
                "/api/runs",
                json=run,
                headers={"authorization": f"Bearer {tokens[ACCOUNTS[n % len(ACCOUNTS)]]}"},
            )
            for n in range(SUBMISSIONS)
        ]
        return list(await asyncio.gather(*calls))


def test_submissions_on_a_tarpit_leave_the_server_answering(
    server: Server, tarpit: Tarpit, tmp_path: Path, database_url: str
) -> None:
    data = tmp_path / "data"
    tokens = {name: create_token(data, name, database_url) for name in ACCOUNTS}
    baseline = latencies(server, 5)

    replies: list[httpx.Response] = []
    started = time.monotonic()
    thread = threading.Thread(
        target=lambda: replies.extend(fresh_loop.run(submit_all(server, tokens, tarpit.url)))
    )
    thread.start()
    deadline = time.monotonic() + 30
    while len(tarpit.held) < 32 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(tarpit.held) >= 32  # every git thread these accounts may take is stuck
    during = latencies(server, 5)
    held_while_measuring = time.monotonic() - started < GIT_TIMEOUT
    thread.join(120)

    assert held_while_measuring  # the calls above were made while git was held
    for kind, before in baseline.items():
        # Answered while every git thread is held, not once git gives up: a hang
        # guard, not a speed goal (these machines are too noisy for one).
        assert max(during[kind]) < GIT_TIMEOUT / 3, (kind, before, during[kind])

    statuses = [reply.status_code for reply in replies]
    assert len(statuses) == SUBMISSIONS
    assert set(statuses) <= {400, 429, 503}
    assert statuses.count(400) == 32  # held until the timeout, then refused
    for reply in replies:
        assert set(reply.json()) == {"error", "duration"}
        if reply.status_code in (429, 503):
            assert int(reply.headers["retry-after"]) > 0
        else:
            assert "unreachable, too slow, or not a git repository" in reply.json()["error"]
            assert reply.json()["duration"] >= GIT_TIMEOUT - 1
    refused = [line for line in server.output().splitlines() if "submission refused" in line]
    assert len(refused) == SUBMISSIONS  # one line each: who, which host, why
    assert all("host=127.0.0.1" in line for line in refused)
    assert sum("took over" in line for line in refused) == 32
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/api/active_runs").json() == {}  # nothing was stored
