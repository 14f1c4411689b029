"""A worker that behaves as the official Fishtest worker does plays a fixed-games
and an SPRT run on a catalogue book against a real `arbiter serve`, on both
storage backends; runs on a book only Arbiter hosts, or on a repository that
is not on GitHub (the official worker downloads engines only as GitHub
zipballs), are kept from it, and the run page says why. A restart of the
server in the middle of a run, and a spell of temporary refusals (503s whose
body is a JSON string, from a primary that lost its lease), end no worker and
lose no acknowledged game.

These machines cannot reach GitHub, so the runs are submitted on a local
repository and moved to a GitHub address while the server is stopped, as a
run submitted online would be stored; the stand-in builds no engines.

The books repository is a stub on loopback (these machines are offline), with
a catalogue imported as `arbiter books import-catalogue` imports the
repository's books.json (in this process: the command itself is tested in
tests/test_cli.py).
"""

import fcntl
import functools
import gzip
import io
import json
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psycopg
import pytest
from sqlalchemy import make_url, select, update

from arbiter.domain.actions import SYSTEM_USER
from arbiter.domain.files.books import BookLibrary
from arbiter.protocol.books import SHIPPED_BOOK
from arbiter.runtime.bootstrap import open_storage
from arbiter.runtime.settings import Settings
from arbiter.storage.engine import make_engine, sqlite_url
from arbiter.storage.lease import ADVISORY_LOCK_KEY
from arbiter.storage.records import evolve
from arbiter.storage.schema import runs
from tests.storage.test_lease import end_lease_sessions, libpq
from tests.web.live_server import (
    PASSWORD,
    Server,
    create_token,
    create_user,
    start_server,
    stop,
)
from tests.web.official_worker import OfficialLikeWorker, official_text_hash

BOOK = "e2e_catalogue.epd"
GAMES = 640  # the runs a fleet meets an outage in
GITHUB_REPO = "https://github.com/alice/Stockfish"
SHIPPED = Path(__file__).parents[2] / "src" / "arbiter" / "data" / "books" / SHIPPED_BOOK


@pytest.fixture
def books_repository(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A stub of official-stockfish/books: `<name>.zip` over HTTP, and its books.json.
    The book has CRLF line endings, so only a hash of its text matches."""
    root = tmp_path / "books-repo"
    root.mkdir()
    lines = SHIPPED.read_text().splitlines()[:300]
    book = root / BOOK
    book.write_bytes("\r\n".join(lines).encode() + b"\r\n")
    with zipfile.ZipFile(root / f"{BOOK}.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(book, BOOK)
    entry = {"total": 300, "white": 300, "black": 0, "min_depth": 8, "max_depth": 8}
    catalogue = {BOOK: {**entry, "sri": official_text_hash(book)}}
    (root / "books.json").write_text(json.dumps(catalogue))
    book.unlink()  # only the zip is served
    handler = functools.partial(QuietHandler, directory=str(root))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root / "books.json"
    finally:
        httpd.shutdown()
        httpd.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def import_catalogue(data_dir: Path, database_url: str, catalogue: Path) -> int:
    """How many books the catalogue holds, once imported into the server's database."""
    settings = Settings(data_dir=data_dir, database_url=database_url)
    with open_storage(settings) as storage:
        library = BookLibrary(storage, data_dir / "books")
        library.load()
        return library.import_catalogue(json.loads(catalogue.read_text()), SYSTEM_USER)


@pytest.fixture
def server(
    tmp_path: Path, database_url: str, books_repository: tuple[str, Path]
) -> Iterator[tuple[Server, dict[str, str]]]:
    data_dir = tmp_path / "server"
    data_dir.mkdir()
    assert import_catalogue(data_dir, database_url, books_repository[1]) == 1
    create_user(data_dir, "alice", database_url)
    create_user(data_dir, "root", database_url, approver=True)
    tokens = {name: create_token(data_dir, name, database_url) for name in ("alice", "root")}
    live = start_server(data_dir, database_url)
    try:
        yield live, tokens
    finally:
        stop(live)


def submit(server: Server, tokens: dict[str, str], repo_url: str, **args: Any) -> str:
    body = {"tests_repo": repo_url, "base_tag": "master", "new_tag": "patch", **args}
    alice = {"authorization": f"Bearer {tokens['alice']}"}
    reply = httpx.post(f"{server.url}/api/runs", json=body, headers=alice, timeout=30)
    assert reply.status_code == 200, reply.text
    run_id: str = reply.json()["run_id"]
    root = {"authorization": f"Bearer {tokens['root']}"}
    approved = httpx.post(f"{server.url}/api/runs/{run_id}/approve", headers=root, timeout=30)
    assert approved.status_code == 200, approved.text
    return run_id


def move_to_github(data_dir: Path, database_url: str, run_ids: list[str]) -> None:
    """Store these runs as submitted on GitHub (the server stopped)."""
    engine = make_engine(database_url or sqlite_url(data_dir))
    try:
        with engine.begin() as connection:
            for run_id in run_ids:
                query = select(runs.c.args).where(runs.c.id == run_id)
                spec = evolve(connection.execute(query).scalar_one(), tests_repo=GITHUB_REPO)
                connection.execute(update(runs).where(runs.c.id == run_id).values(args=spec))
    finally:
        engine.dispose()


def restart_on_github(
    live: Server,
    data_dir: Path,
    database_url: str,
    run_ids: list[str],
    extra_env: dict[str, str] | None = None,
) -> Server:
    stop(live)
    move_to_github(data_dir, database_url, run_ids)
    return start_server(data_dir, database_url, extra_env, port=live.port)


def official_worker(
    live: Server, books_repository: tuple[str, Path], tmp_path: Path
) -> OfficialLikeWorker:
    """alice's official-like worker, its books kept under `tmp_path`."""
    worker = OfficialLikeWorker(
        live.url, "alice", PASSWORD, books_repository[0], tmp_path / "worker-books"
    )
    worker.books_dir.mkdir()
    return worker


def get_run(server: Server, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = httpx.get(f"{server.url}/api/get_run/{run_id}", timeout=30).json()
    return run


def test_the_official_workers_protocol_finishes_fixed_games_and_sprt_runs(
    server: tuple[Server, dict[str, str]],
    books_repository: tuple[str, Path],
    repo_url: str,
    tmp_path: Path,
    database_url: str,
) -> None:
    first, tokens = server
    hosted = submit(first, tokens, repo_url, book=SHIPPED_BOOK, priority=1)
    local = submit(first, tokens, repo_url, book=BOOK, priority=1)
    fixed = submit(first, tokens, repo_url, book=BOOK, num_games=400, tc="10+0.1")
    sprt = submit(
        first,
        tokens,
        repo_url,
        book=BOOK,
        num_games=40_000,
        sprt={"elo0": 0, "elo1": 10, "elo_model": "normalized"},
    )
    live = restart_on_github(first, tmp_path / "server", database_url, [hosted, fixed, sprt])
    try:
        worker = official_worker(live, books_repository, tmp_path)
        played = worker.run_fleet()
        check_the_fleets_work(live, worker, played, hosted, local, fixed, sprt)
    finally:
        stop(live)


def check_the_fleets_work(
    live: Server,
    worker: OfficialLikeWorker,
    played: int,
    hosted: str,
    local: str,
    fixed: str,
    sprt: str,
) -> None:

    assert worker.failed == []
    assert worker.final == []
    assert played == len(worker.tasks) > 2
    assert {log.run_id for log in worker.tasks} == {fixed, sprt}  # never the hosted-book run
    assert get_run(live, fixed)["finished"]
    assert get_run(live, fixed)["results"]["wins"] > 0
    decided = get_run(live, sprt)
    assert decided["finished"]
    assert decided["args"]["sprt"]["state"] == "accepted"
    waiting = get_run(live, hosted)
    assert not waiting["finished"]
    assert any("catalogue" in reason for reason in waiting["why_no_workers"])
    not_on_github = get_run(live, local)
    assert not_on_github["results"]["wins"] + not_on_github["results"]["losses"] == 0
    assert any("not on GitHub" in reason for reason in not_on_github["why_no_workers"])

    # The run's archive holds every game the worker uploaded, task by task.
    for run_id in (fixed, sprt):
        reply = httpx.get(f"{live.url}/api/run_pgns/{run_id}.pgn.gz", timeout=30)
        assert reply.status_code == 200, reply.text
        uploaded = "".join(log.pgn for log in worker.tasks if log.run_id == run_id)
        assert gzip.decompress(reply.content).decode() == uploaded
        assert uploaded.count("[Event ") == sum(
            log.games for log in worker.tasks if log.run_id == run_id
        )

    # Every PGN the worker uploaded comes back byte for byte.
    for log in worker.tasks:
        name = f"{log.run_id}-{log.task_id}"
        for path in (f"/api/pgn/{name}.pgn", f"/api/pgn/{name}"):
            reply = httpx.get(live.url + path, timeout=30)
            assert reply.status_code == 200, (path, reply.text)
            text = reply.content
            if text[:2] == b"\x1f\x8b":
                text = gzip.GzipFile(fileobj=io.BytesIO(text)).read()
            assert text.decode() == log.pgn


def test_a_restart_mid_run_ends_no_worker_and_loses_no_acknowledged_game(
    server: tuple[Server, dict[str, str]],
    books_repository: tuple[str, Path],
    repo_url: str,
    tmp_path: Path,
    database_url: str,
) -> None:
    first, tokens = server
    run_id = submit(first, tokens, repo_url, book=BOOK, num_games=GAMES, tc="10+0.1")
    data_dir = tmp_path / "server"
    live = restart_on_github(first, data_dir, database_url, [run_id])
    try:
        worker, fleet = fleet_mid_run(live, books_repository, tmp_path)
        stop(live)  # SIGTERM, as a deploy restarts it
        live = start_server(data_dir, database_url, port=live.port)
        assert_every_acknowledged_game_counted(live, worker, fleet, run_id)
        assert worker.network_problems > 0  # it met the restart, and waited
    finally:
        stop(live)


def fleet_mid_run(
    live: Server, books_repository: tuple[str, Path], tmp_path: Path
) -> tuple[OfficialLikeWorker, threading.Thread]:
    """alice's official-like fleet playing the run, once 40 of its games are
    acknowledged: a few seconds of games, so what the test does next lands
    mid-run."""
    worker = official_worker(live, books_repository, tmp_path)
    worker.batch_pause = 0.02
    worker.retry_wait = 2.0  # the official 15 s, scaled: 5 update tries outlast an outage
    fleet = threading.Thread(target=worker.run_fleet, daemon=True)
    fleet.start()
    wait_for(lambda: sum(log.acknowledged for log in worker.tasks) >= 40, "games")
    return worker, fleet


def assert_every_acknowledged_game_counted(
    live: Server, worker: OfficialLikeWorker, fleet: threading.Thread, run_id: str
) -> None:
    """The fleet ran the run to its end, met no reply it takes as final, and the
    run counts exactly the games the server acknowledged."""
    fleet.join(timeout=120)
    assert not fleet.is_alive()
    assert worker.final == []
    run = get_run(live, run_id)
    assert run["finished"]
    counted = sum(run["results"][key] for key in ("wins", "losses", "draws"))
    assert counted == sum(log.acknowledged for log in worker.tasks) == GAMES


@contextmanager
def lease_held_elsewhere(data_dir: Path, database_url: str) -> Iterator[None]:
    """The primary's lease taken from it and held for the block by someone who
    serves nothing (so the primary takes it back afterwards and goes on)."""
    url = make_url(database_url or sqlite_url(data_dir))
    if url.get_backend_name() == "sqlite":
        path = Path(f"{url.database}.primary.lock")
        path.unlink()  # the primary's lock is on the old file now
        with path.open("a") as rival:
            fcntl.flock(rival, fcntl.LOCK_EX)
            yield
        return
    with psycopg.connect(libpq(database_url), autocommit=True) as rival:
        end_lease_sessions(rival)
        rival.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))  # waits for the end
        yield
        rival.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))


def test_a_temporary_refusal_ends_no_official_worker(
    server: tuple[Server, dict[str, str]],
    books_repository: tuple[str, Path],
    repo_url: str,
    tmp_path: Path,
    database_url: str,
) -> None:
    """A primary without its lease answers worker calls with 503s whose body is a
    JSON string: the official worker takes them as network problems and waits,
    so a fleet that meets them mid-run plays on once the primary serves again."""
    first, tokens = server
    run_id = submit(first, tokens, repo_url, book=BOOK, num_games=GAMES, tc="10+0.1")
    data_dir = tmp_path / "server"
    checks = {"ARBITER_LEASE_CHECK_SECONDS": "1"}
    live = restart_on_github(first, data_dir, database_url, [run_id], checks)
    try:
        worker, fleet = fleet_mid_run(live, books_repository, tmp_path)
        with lease_held_elsewhere(data_dir, database_url):
            wait_for(lambda: worker.temporary_refusals >= 2, "temporary refusals")
        assert_every_acknowledged_game_counted(live, worker, fleet, run_id)
    finally:
        stop(live)


def wait_for(done: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.05)
