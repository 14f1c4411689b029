"""The files API end to end in-process: PGN upload and downloads, nets, books."""

import base64
import gzip
import hashlib
import io
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import chess.pgn
import httpx2 as httpx
import msgspec
import pytest
from starlette.testclient import TestClient

from arbiter.cli import main
from arbiter.domain.files.book_catalogue import REFERENCE_DEFAULT_BOOK
from arbiter.domain.run_args import DEFAULT_BOOK
from arbiter.protocol import WORKER_VERSION
from arbiter.runtime.settings import Settings
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from arbiter.storage.records import evolve
from arbiter.web import files_api
from arbiter.web.app import create_app
from arbiter.worker.errors import UpdateError
from arbiter.worker.package_trust import verify
from arbiter.worker.update import PackageInfo
from tests.domain.runs.support import worker
from tests.web.live_server import create_token, create_user, start_server, stop
from tests.web.support import STRONG_PASSWORD, make_user, state

GAMES = [
    '[Event "Batch 0"]\n[Round "1"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# *\n',
    '[Event "Batch 0"]\n[Round "2"]\n[Result "1/2-1/2"]\n\n1. d4 d5 1/2-1/2\n',
]
NET = b"NNUE" + bytes(range(256)) * 16
NET_NAME = f"nn-{hashlib.sha256(NET).hexdigest()[:12]}.nnue"


UHO_SRI = "QHAU1P3LurcJr7UTRI7HZCVFsoYBWC3OTsBqZY/FfQA6VQo3MmECWtByB4gVACW5"


def worker_body(**fields: Any) -> dict[str, Any]:
    return {"worker_info": msgspec.to_builtins(worker()), "password": STRONG_PASSWORD, **fields}


def running_task(client: TestClient, repo_url: str) -> tuple[str, int]:
    alice = make_user(client, "alice")
    root = make_user(client, "root", approver=True)
    runs = state(client).runs
    body = {"tests_repo": repo_url, "new_tag": "patch", "base_tag": "master", "num_games": 2000}
    run_id = runs.lifecycle.submit(alice, body)
    runs.lifecycle.approve(root, run_id)
    reply = client.post("/api/request_task", json=worker_body()).json()
    assert reply["run"]["_id"] == run_id, reply
    return run_id, reply["task_id"]


def upload(client: TestClient, run_id: str, task_id: int, pgn: str) -> Any:
    return client.post("/api/upload_pgn", json=worker_body(run_id=run_id, task_id=task_id, pgn=pgn))


def encoded(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode())).decode()


def bearer(client: TestClient, username: str = "alice") -> dict[str, str]:
    if state(client).accounts.get_user(username) is None:
        make_user(client, username)
    return {"authorization": f"Bearer {state(client).accounts.create_token(username)}"}


# ---------------------------------------------------------------- PGNs


def test_uploaded_pgns_download_per_task_and_per_run(client: TestClient, repo_url: str) -> None:
    run_id, task_id = running_task(client, repo_url)
    reply = upload(client, run_id, task_id, encoded(GAMES[0] + "\n" + GAMES[1]))
    assert reply.status_code == 200, reply.text
    assert set(reply.json()) == {"duration"}

    task = client.get(f"/api/pgn/{run_id}-{task_id}.pgn")
    assert task.headers["content-encoding"] == "gzip"
    assert f'filename="{run_id}-{task_id}.pgn"' in task.headers["content-disposition"]
    stream = io.StringIO(task.text)  # the client undid the gzip encoding
    games = [chess.pgn.read_game(stream) for _ in range(2)]
    assert [game.headers["Result"] for game in games if game] == ["1-0", "1/2-1/2"]
    assert [len(list(game.mainline_moves())) for game in games if game] == [7, 2]

    bare = client.get(f"/api/pgn/{run_id}-{task_id}")  # the reference serves it too
    assert (bare.status_code, bare.content) == (200, task.content)
    assert f'filename="{run_id}-{task_id}"' in bare.headers["content-disposition"]

    archive = client.get(f"/api/run_pgns/{run_id}.pgn.gz")
    assert archive.headers["content-type"] == "application/gzip"
    assert gzip.decompress(archive.content).decode() == GAMES[0] + "\n" + GAMES[1]


@pytest.mark.parametrize(
    ("pgn", "message"),
    [
        ("%%%", "pgn is not valid base64"),
        (base64.b64encode(b"plain text").decode(), "pgn is not gzip data"),
    ],
)
def test_bad_pgn_uploads_are_refused_and_store_nothing(
    client: TestClient, repo_url: str, pgn: str, message: str
) -> None:
    run_id, task_id = running_task(client, repo_url)
    reply = upload(client, run_id, task_id, pgn)
    assert reply.status_code == 400
    assert reply.json()["error"] == f"/api/upload_pgn: {message}"
    assert client.get(f"/api/pgn/{run_id}-{task_id}.pgn").status_code == 404


def test_pgn_of_another_workers_task_is_refused(client: TestClient, repo_url: str) -> None:
    run_id, task_id = running_task(client, repo_url)
    body = worker_body(run_id=run_id, task_id=task_id, pgn=encoded(GAMES[0]))
    body["worker_info"]["unique_key"] = "ffff-1234-5678-9abc-def012345678"
    reply = client.post("/api/upload_pgn", json=body)
    assert reply.status_code == 400
    assert "Invalid unique_key" in reply.json()["error"]
    assert client.get(f"/api/run_pgns/{run_id}.pgn.gz").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/api/pgn/nothing.pgn",
        "/api/pgn/" + "0" * 24 + "-0.pgn",
        "/api/pgn/" + "0" * 24 + "-0",
        "/api/run_pgns/x.gz",
    ],
)
def test_missing_pgns_are_json_404s(client: TestClient, path: str) -> None:
    reply = client.get(path)
    assert reply.status_code == 404
    assert reply.json()["error"].startswith(path)


# ---------------------------------------------------------------- nets


def test_net_upload_list_and_download(client: TestClient) -> None:
    reply = client.post(f"/api/upload_net?name={NET_NAME}", content=NET, headers=bearer(client))
    assert reply.status_code == 200, reply.text
    assert reply.json()["sha256"] == hashlib.sha256(NET).hexdigest()
    listed = client.get("/api/nns").json()["nets"]
    assert [(n["name"], n["user"], n["size"]) for n in listed] == [(NET_NAME, "alice", len(NET))]
    download = client.get(f"/api/nn/{NET_NAME}")
    assert download.content == NET
    assert client.get("/api/nns").json()["nets"][0]["downloads"] == 1


def test_net_with_a_wrong_name_is_refused(client: TestClient, settings: Any) -> None:
    reply = client.post(
        "/api/upload_net?name=nn-000000000000.nnue", content=NET, headers=bearer(client)
    )
    assert reply.status_code == 400
    assert f"it should be named {NET_NAME}" in reply.json()["error"]
    assert client.get("/api/nns").json()["nets"] == []
    assert list(Path(settings.data_dir, "staging").iterdir()) == []


def test_uploads_need_a_token(client: TestClient) -> None:
    reply = client.post(f"/api/upload_net?name={NET_NAME}", content=NET)
    assert reply.status_code == 401
    bad = {"authorization": "Bearer nope"}
    assert client.post("/api/upload_book?name=x.epd", content=b"", headers=bad).status_code == 401


def test_uploads_over_the_limit_are_refused(tmp_path: Path, settings: Any) -> None:
    from arbiter.web.app import create_app

    small = settings.with_changes(max_upload_bytes=1000)
    with TestClient(create_app(small)) as client:
        reply = client.post(f"/api/upload_net?name={NET_NAME}", content=NET, headers=bearer(client))
        assert reply.status_code == 413
        assert client.get("/api/nns").json()["nets"] == []


def test_uploads_beyond_the_daily_quota_are_a_429_that_says_when(settings: Settings) -> None:
    with TestClient(create_app(settings.with_changes(upload_quota_files=1))) as client:
        reply = client.post(f"/api/upload_net?name={NET_NAME}", content=NET, headers=bearer(client))
        assert reply.status_code == 200, reply.text
        epd = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"
        refused = client.post("/api/upload_book?name=mine.epd", content=epd, headers=bearer(client))
        assert refused.status_code == 429
        assert "uploaded 1 files in the last 24 hours" in refused.json()["error"]
        assert int(refused.headers["retry-after"]) > 23 * 3600
        assert "mine.epd" not in client.get("/api/books").json()["books"]


def test_a_declared_size_beyond_the_quota_is_refused_before_the_body(settings: Settings) -> None:
    with TestClient(create_app(settings.with_changes(upload_quota_bytes=len(NET) - 1))) as client:
        reply = client.post(f"/api/upload_net?name={NET_NAME}", content=NET, headers=bearer(client))
        assert reply.status_code == 400
        message = "/api/upload_net: file: The file is larger than the 4.0 KiB one account may"
        assert reply.json()["error"].startswith(message)
        assert client.get("/api/nns").json()["nets"] == []


def test_unknown_net_is_a_404(client: TestClient) -> None:
    assert client.get("/api/nn/nn-000000000000.nnue").status_code == 404


# ---------------------------------------------------------------- books


def test_the_shipped_book_is_listed_and_downloads_with_its_hash(client: TestClient) -> None:
    books = client.get("/api/books").json()["books"]
    assert DEFAULT_BOOK in books
    data = client.get(f"/api/book/{DEFAULT_BOOK}").content
    digest = base64.b64encode(hashlib.sha384(data).digest()).decode()
    assert books[DEFAULT_BOOK]["sri"] == digest  # bare, as the official worker computes it
    assert books[DEFAULT_BOOK]["total"] == len(data.splitlines())
    assert books[DEFAULT_BOOK]["hosted"] is True


def test_catalogue_books_are_listed_but_not_served(client: TestClient) -> None:
    books = client.get("/api/books").json()["books"]
    uho = books[REFERENCE_DEFAULT_BOOK]
    assert uho["hosted"] is False
    assert set(uho) >= {"total", "white", "black", "min_depth", "max_depth", "sri"}
    assert client.get(f"/api/book/{REFERENCE_DEFAULT_BOOK}").status_code == 404


def test_book_upload_then_runs_may_use_it(client: TestClient, repo_url: str) -> None:
    epd = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"
    reply = client.post("/api/upload_book?name=mine.epd", content=epd, headers=bearer(client))
    assert reply.status_code == 200, reply.text
    assert reply.json()["total"] == 1
    body = {"tests_repo": repo_url, "new_tag": "patch", "base_tag": "master", "book": "mine.epd"}
    submitted = client.post("/api/runs", json=body, headers=bearer(client))
    assert submitted.status_code == 200, submitted.text


def test_runs_with_an_unknown_book_are_refused(client: TestClient, repo_url: str) -> None:
    body = {"tests_repo": repo_url, "new_tag": "patch", "base_tag": "master", "book": "no.epd"}
    reply = client.post("/api/runs", json=body, headers=bearer(client))
    assert reply.status_code == 400
    assert "Unknown book no.epd" in reply.json()["error"]


def submit_approved(client: TestClient, repo_url: str, **args: Any) -> str:
    alice = make_user(client, "alice")
    root = make_user(client, "root", approver=True)
    runs = state(client).runs
    body = {"tests_repo": repo_url, "new_tag": "patch", "base_tag": "master", **args}
    run_id = runs.lifecycle.submit(alice, body)
    runs.lifecycle.approve(root, run_id)
    return run_id


def test_a_new_run_gets_the_references_default_catalogue_book(
    client: TestClient, repo_url: str
) -> None:
    submit_approved(client, repo_url)
    reply = client.post("/api/request_task", json=worker_body()).json()
    assert reply["run"]["args"]["book"] == REFERENCE_DEFAULT_BOOK
    assert reply["run"]["args"]["book_sri"] == UHO_SRI


def official_worker_body() -> dict[str, Any]:
    """A request_task of the official worker's machine (no `hosted_books`)."""
    return worker_body(worker_info=msgspec.to_builtins(worker(hosted_books=False)))


def as_if_on_github(client: TestClient, run_id: str) -> None:
    """The live run as if submitted on GitHub (these machines reach none): the
    official worker then lacks nothing but, maybe, the book."""
    live = state(client).runs.context.registry.get(run_id)
    assert live is not None
    github = evolve(live.run.args, tests_repo="https://github.com/alice/Stockfish")
    live.run = evolve(live.run, args=github)


def test_a_hosted_book_goes_to_arbiter_workers_only(client: TestClient, repo_url: str) -> None:
    run_id = submit_approved(client, repo_url, book=DEFAULT_BOOK)
    as_if_on_github(client, run_id)
    official = client.post("/api/request_task", json=official_worker_body()).json()
    assert "task_waiting" in official or "run" not in official, official
    why = client.get(f"/api/get_run/{run_id}").json()["why_no_workers"]
    assert any("catalogue" in reason for reason in why), why
    ours = worker_body(worker_info=msgspec.to_builtins(worker(hosted_books=True)))
    reply = client.post("/api/request_task", json=ours).json()
    assert reply["run"]["_id"] == run_id, reply
    assert reply["run"]["args"]["book_sri"] == state(client).books.sri(DEFAULT_BOOK)
    assert not reply["run"]["args"]["book_sri"].startswith("sha384-")


# ---------------------------------------------------------------- reads without side effects


@pytest.fixture
def backend_client(settings: Settings, database_url: str) -> Iterator[TestClient]:
    """The app on each storage backend in turn."""
    with TestClient(create_app(settings.with_changes(database_url=database_url))) as test_client:
        yield test_client


def stored_downloads(database_url: str, name: str) -> int:
    """The net's counter as the database holds it, read through a connection of its own."""
    engine = make_engine(database_url)
    try:
        with Storage(engine).read() as tx:
            net = tx.nets.get(name)
    finally:
        engine.dispose()
    assert net is not None
    return net.downloads


def with_net(client: TestClient) -> None:
    reply = client.post(f"/api/upload_net?name={NET_NAME}", content=NET, headers=bearer(client))
    assert reply.status_code == 200, reply.text


def test_head_on_a_net_is_not_a_download(backend_client: TestClient, database_url: str) -> None:
    with_net(backend_client)
    head = backend_client.head(f"/api/nn/{NET_NAME}")
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(NET))
    assert backend_client.get("/api/nns").json()["nets"][0]["downloads"] == 0
    assert state(backend_client).nets.flush_downloads() == 0
    assert stored_downloads(database_url, NET_NAME) == 0


def test_downloads_are_written_by_the_flush_job_not_per_request(
    backend_client: TestClient, database_url: str
) -> None:
    with_net(backend_client)
    for _ in range(20):
        assert backend_client.get(f"/api/nn/{NET_NAME}").content == NET
    assert stored_downloads(database_url, NET_NAME) == 0  # no download wrote to the database
    assert backend_client.get("/api/nns").json()["nets"][0]["downloads"] == 20

    jobs = state(backend_client).jobs
    assert jobs is not None
    status = jobs.run_now("flush_download_counts").result(timeout=30)
    assert (status.runs, status.last_error) == (1, None)
    assert stored_downloads(database_url, NET_NAME) == 20
    assert backend_client.get("/api/nns").json()["nets"][0]["downloads"] == 20


def test_download_counts_survive_a_clean_shutdown(settings: Settings, database_url: str) -> None:
    app = create_app(settings.with_changes(database_url=database_url, jobs=False))
    with TestClient(app) as client:
        with_net(client)
        for _ in range(7):
            client.get(f"/api/nn/{NET_NAME}")
        assert stored_downloads(database_url, NET_NAME) == 0
    assert stored_downloads(database_url, NET_NAME) == 7  # written by the lifespan's shutdown


def test_a_real_server_writes_its_counts_when_stopped(tmp_path: Path, database_url: str) -> None:
    data_dir = tmp_path / "server-data"
    data_dir.mkdir()
    server = start_server(data_dir, database_url)
    try:
        create_user(data_dir, "alice", database_url)
        token = create_token(data_dir, "alice", database_url)
        upload_url = f"{server.url}/api/upload_net?name={NET_NAME}"
        reply = httpx.post(upload_url, content=NET, headers={"authorization": f"Bearer {token}"})
        assert reply.status_code == 200, reply.text
        for _ in range(4):
            assert httpx.get(f"{server.url}/api/nn/{NET_NAME}").content == NET
        assert httpx.head(f"{server.url}/api/nn/{NET_NAME}").status_code == 200
        assert stored_downloads(database_url, NET_NAME) == 0
    finally:
        stop(server)  # SIGTERM: a clean stop (uvicorn then re-raises it: status -15)
    assert stored_downloads(database_url, NET_NAME) == 4  # the HEAD is not one of them


def test_a_secondary_writes_the_downloads_it_serves(settings: Settings, database_url: str) -> None:
    primary_settings = settings.with_changes(database_url=database_url)
    with TestClient(create_app(primary_settings)) as primary:
        with_net(primary)
    secondary_settings = primary_settings.with_changes(role="secondary")
    with TestClient(create_app(secondary_settings)) as secondary:
        secondary.get(f"/api/nn/{NET_NAME}")
        jobs = state(secondary).jobs
        assert jobs is not None
        assert [job.name for job in jobs.status()] == ["flush_download_counts"]
        jobs.run_now("flush_download_counts").result(timeout=30)
        assert stored_downloads(database_url, NET_NAME) == 1


def assert_inert_attachment(reply: Any, name: str, types: tuple[str, ...]) -> None:
    """A download no browser renders or runs: an attachment, a passive type, no sniffing."""
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-disposition"] == f'attachment; filename="{name}"'
    assert reply.headers["content-type"].split(";")[0] in types
    assert reply.headers["x-content-type-options"] == "nosniff"
    assert reply.headers["content-security-policy"] == "default-src 'none'; sandbox"


def test_downloads_are_inert_attachments(client: TestClient, repo_url: str) -> None:
    run_id, task_id = running_task(client, repo_url)
    # A PGN whose bytes are a web page: it must stay a file.
    page = '<html><script>alert(1)</script></html>\n[Event "x"]\n\n1. e4 *\n'
    assert upload(client, run_id, task_id, encoded(page)).status_code == 200
    with_net(client)
    pgn_types = ("application/x-chess-pgn", "application/gzip", "application/octet-stream")
    task_pgn = f"{run_id}-{task_id}.pgn"
    assert_inert_attachment(client.get(f"/api/pgn/{task_pgn}"), task_pgn, pgn_types)
    run_pgns = f"{run_id}.pgn.gz"
    assert_inert_attachment(client.get(f"/api/run_pgns/{run_pgns}"), run_pgns, pgn_types)
    binary = ("application/octet-stream",)
    assert_inert_attachment(client.get(f"/api/nn/{NET_NAME}"), NET_NAME, binary)
    assert_inert_attachment(client.get(f"/api/book/{DEFAULT_BOOK}"), DEFAULT_BOOK, binary)


@pytest.mark.parametrize(
    ("name", "disposition"),
    [
        ("a.pgn", 'attachment; filename="a.pgn"'),
        ("a.pgn\n", "attachment; filename*=UTF-8''a.pgn%0A"),
        ('a"; x=".pgn', "attachment; filename*=UTF-8''a%22%3B%20x%3D%22.pgn"),
        ("é.pgn", "attachment; filename*=UTF-8''%C3%A9.pgn"),
    ],
)
def test_attachment_names_never_put_raw_path_bytes_in_a_header(name: str, disposition: str) -> None:
    assert files_api._attachment(name)["content-disposition"] == disposition


def test_a_path_ending_in_a_newline_is_not_a_file(client: TestClient, repo_url: str) -> None:
    run_id, task_id = running_task(client, repo_url)
    assert upload(client, run_id, task_id, encoded(GAMES[0])).status_code == 200
    with_net(client)
    for path in (
        f"/api/pgn/{run_id}-{task_id}.pgn%0A",
        f"/api/run_pgns/{run_id}.pgn.gz%0A",
        f"/api/nn/{NET_NAME}%0A",
        f"/api/book/{DEFAULT_BOOK}%0A",
    ):
        reply = client.get(path)
        assert reply.status_code == 404, path
        assert reply.headers["x-content-type-options"] == "nosniff"


def test_a_book_the_catalogue_gains_goes_to_the_official_worker_at_once(
    client: TestClient, repo_url: str
) -> None:
    """The scheduler works out a run's needs once; a new catalogue must redo them."""
    run_id = submit_approved(client, repo_url, book=DEFAULT_BOOK)
    as_if_on_github(client, run_id)
    assert "run" not in client.post("/api/request_task", json=official_worker_body()).json()
    library = state(client).books
    counts = {"total": 1, "white": 1, "black": 0, "min_depth": None, "max_depth": None}
    library.import_catalogue({DEFAULT_BOOK: {**counts, "sri": library.sri(DEFAULT_BOOK)}}, "op")
    reply = client.post("/api/request_task", json=official_worker_body()).json()
    assert reply["run"]["_id"] == run_id, reply


def test_a_run_not_on_github_goes_to_arbiter_workers_only(
    client: TestClient, repo_url: str
) -> None:
    run_id = submit_approved(client, repo_url)  # a local repository, a catalogue book
    official = client.post("/api/request_task", json=official_worker_body()).json()
    assert "run" not in official, official
    why = client.get(f"/api/get_run/{run_id}").json()["why_no_workers"]
    assert any("not on GitHub" in reason for reason in why), why
    page = client.get(f"/tests/view/{run_id}")
    assert "not on GitHub, the only host the official worker downloads from" in page.text
    reply = client.post("/api/request_task", json=worker_body()).json()
    assert reply["run"]["_id"] == run_id, reply


def test_the_worker_package_is_published_with_its_description(client: TestClient) -> None:
    described = client.get("/api/worker/package.json")
    assert described.status_code == 200
    info = described.json()
    assert info["protocol"] == WORKER_VERSION
    assert info["filename"].endswith("-py3-none-any.whl")
    wheel = client.get("/api/worker/package")
    assert wheel.status_code == 200
    assert wheel.headers["content-type"] == "application/zip"
    assert info["filename"] in wheel.headers["content-disposition"]
    assert len(wheel.content) == info["size"]
    assert hashlib.sha256(wheel.content).hexdigest() == info["sha256"]
    assert client.head("/api/worker/package").status_code == 200
    by_name = client.get(f"/api/worker/{info['filename']}")  # where pip installs from
    assert (by_name.status_code, by_name.content) == (200, wheel.content)
    other = client.get("/api/worker/arbiter-0.0.0-py3-none-any.whl")
    assert other.status_code == 404
    assert info["filename"] in other.json()["error"]


def test_the_package_is_signed_with_the_key_the_operator_can_print(
    client: TestClient, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a worker checks before it installs the package (worker/package_trust.py)."""
    info = client.get("/api/worker/package.json").json()
    assert main(["signing-key", "--data-dir", str(settings.data_dir)]) == 0
    assert info["public_key"] == capsys.readouterr().out.strip()
    package = PackageInfo.parse(info)  # as the worker reads it
    verify(package.statement(), package.public_key, package.signature, info["public_key"])
    tampered = replace(package, size=package.size + 1)
    with pytest.raises(UpdateError, match="does not verify"):
        verify(tampered.statement(), tampered.public_key, tampered.signature, info["public_key"])
