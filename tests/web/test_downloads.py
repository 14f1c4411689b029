"""Nets and books served from the database: ETag, conditional and Range
requests, HEAD; a secondary with an empty data dir of its own, on another
port, serving a net and a book uploaded to the primary; the same through an
S3-compatible bucket (a local moto server), where a damaged object is refused."""

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx2 as httpx
import pytest
from starlette.testclient import TestClient

from arbiter.domain.files.bucket_files import BucketFiles
from arbiter.domain.files.stored import CHUNK_BYTES
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from arbiter.storage.object_store import Bucket
from tests.domain.files.support import stage
from tests.s3_server import S3Bucket
from tests.storage.test_unavailable import closed_port
from tests.web.api_support import api_client, api_settings
from tests.web.live_server import create_token, create_user, start_server, stop
from tests.web.support import state

NET = bytes(range(256)) * (CHUNK_BYTES // 256 + 100)  # a chunk and a little more


def net_name(data: bytes) -> str:
    return f"nn-{hashlib.sha256(data).hexdigest()[:12]}.nnue"


@pytest.fixture
def client(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    with api_client(api_settings(tmp_path, database_url), monkeypatch) as test_client:
        state(test_client).nets.add("alice", net_name(NET), stage(tmp_path, NET))
        yield test_client


def url() -> str:
    return f"/api/nn/{net_name(NET)}"


def test_a_whole_download_carries_its_etag_and_length(client: TestClient) -> None:
    reply = client.get(url())
    assert reply.status_code == 200
    assert reply.content == NET
    assert reply.headers["etag"] == f'"{hashlib.sha256(NET).hexdigest()}"'
    assert reply.headers["content-length"] == str(len(NET))
    assert reply.headers["accept-ranges"] == "bytes"
    assert reply.headers["content-disposition"] == f'attachment; filename="{net_name(NET)}"'


def test_a_known_etag_is_not_sent_again(client: TestClient) -> None:
    etag = client.head(url()).headers["etag"]
    reply = client.get(url(), headers={"If-None-Match": f'"other", {etag}'})
    assert (reply.status_code, reply.content, reply.headers["etag"]) == (304, b"", etag)


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [
        ("bytes=0-9", 0, 9),
        (f"bytes={CHUNK_BYTES - 5}-{CHUNK_BYTES + 4}", CHUNK_BYTES - 5, CHUNK_BYTES + 4),
        (f"bytes={CHUNK_BYTES + 10}-", CHUNK_BYTES + 10, len(NET) - 1),
        ("bytes=-7", len(NET) - 7, len(NET) - 1),
        (f"bytes=5-{10 * len(NET)}", 5, len(NET) - 1),
    ],
)
def test_a_range_gets_only_its_bytes(client: TestClient, header: str, start: int, end: int) -> None:
    reply = client.get(url(), headers={"Range": header})
    assert reply.status_code == 206
    assert reply.content == NET[start : end + 1]
    assert reply.headers["content-range"] == f"bytes {start}-{end}/{len(NET)}"
    assert reply.headers["content-length"] == str(end - start + 1)


def test_ranges_it_cannot_or_need_not_serve(client: TestClient) -> None:
    past = client.get(url(), headers={"Range": f"bytes={len(NET)}-"})
    assert (past.status_code, past.headers["content-range"]) == (416, f"bytes */{len(NET)}")
    several = client.get(url(), headers={"Range": "bytes=0-1,5-6"})
    assert (several.status_code, several.content) == (200, NET)
    stale = client.get(url(), headers={"Range": "bytes=0-1", "If-Range": '"an old etag"'})
    assert (stale.status_code, stale.content) == (200, NET)


def test_head_reads_nothing_and_counts_nothing(client: TestClient) -> None:
    reply = client.head(url())
    assert (reply.status_code, reply.content) == (200, b"")
    assert reply.headers["content-length"] == str(len(NET))
    assert state(client).nets.flush_downloads() == 0


def test_a_secondary_with_an_empty_data_dir_serves_what_the_primary_stored(
    tmp_path: Path, postgres_database_url: str
) -> None:
    url = postgres_database_url
    primary_dir, secondary_dir = tmp_path / "primary", tmp_path / "secondary"
    create_user(primary_dir, "alice", url)
    token = create_token(primary_dir, "alice", url)
    primary = start_server(primary_dir, url)
    secondary = start_server(secondary_dir, url, {"ARBITER_ROLE": "secondary"})
    try:
        headers = {"Authorization": f"Bearer {token}"}
        name = net_name(NET)
        uploaded = httpx.post(
            f"{primary.url}/api/upload_net?name={name}", content=NET, headers=headers
        )
        assert uploaded.status_code == 200, uploaded.text
        book = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"
        added = httpx.post(
            f"{primary.url}/api/upload_book?name=e4.epd", content=book, headers=headers
        )
        assert added.status_code == 200, added.text
        net_reply = httpx.get(f"{secondary.url}/api/nn/{name}")
        book_reply = httpx.get(f"{secondary.url}/api/book/e4.epd")
    finally:
        stop(secondary)
        stop(primary)
    assert (net_reply.status_code, net_reply.content) == (200, NET)
    assert (book_reply.status_code, book_reply.content) == (200, book)
    assert not (secondary_dir / "nets").exists()
    assert not (secondary_dir / "books" / "e4.epd").exists()


def test_a_net_whose_stored_bytes_are_missing_is_a_clean_error(client: TestClient) -> None:
    with state(client).storage.write() as tx:
        tx.file_chunks.delete("net", net_name(NET))
    reply = client.get(url())
    assert reply.status_code == 500
    assert reply.json()["error"].endswith("chunk 0 is missing: the server's copy is damaged")


# ------------------------------------------------------------ an S3-compatible bucket


def test_a_secondary_serves_from_the_bucket_what_the_primary_put_there(
    tmp_path: Path, postgres_database_url: str, s3_bucket: S3Bucket
) -> None:
    url = postgres_database_url
    primary_dir, secondary_dir = tmp_path / "primary", tmp_path / "secondary"
    create_user(primary_dir, "alice", url)
    token = create_token(primary_dir, "alice", url)
    primary = start_server(primary_dir, url, s3_bucket.env())
    secondary = start_server(secondary_dir, url, {**s3_bucket.env(), "ARBITER_ROLE": "secondary"})
    name, etag = net_name(NET), f'"{hashlib.sha256(NET).hexdigest()}"'
    try:
        uploaded = httpx.post(
            f"{primary.url}/api/upload_net?name={name}",
            content=NET,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert uploaded.status_code == 200, uploaded.text
        whole = httpx.get(f"{secondary.url}/api/nn/{name}")
        ranged = httpx.get(
            f"{secondary.url}/api/nn/{name}", headers={"Range": f"bytes={CHUNK_BYTES - 2}-"}
        )
        known = httpx.get(f"{secondary.url}/api/nn/{name}", headers={"If-None-Match": etag})
    finally:
        stop(secondary)
        stop(primary)
    assert (whole.status_code, whole.content, whole.headers["etag"]) == (200, NET, etag)
    assert (ranged.status_code, ranged.content) == (206, NET[CHUNK_BYTES - 2 :])
    assert (known.status_code, known.content) == (304, b"")
    assert f"arbiter/nets/{name}/{hashlib.sha256(NET).hexdigest()}" in s3_bucket.object_keys()
    engine = make_engine(url)
    with Storage(engine).read() as tx:
        assert tx.file_chunks.count("net", name) == 0  # the bytes are only in the bucket
    engine.dispose()
    assert not (secondary_dir / "nets").exists()


def test_a_damaged_object_in_the_bucket_is_refused(
    tmp_path: Path, database_url: str, s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3_bucket.settings()
    settings = api_settings(
        tmp_path,
        database_url,
        files_s3_endpoint=bucket.endpoint,
        files_s3_bucket=bucket.bucket,
        files_s3_region=bucket.region,
        files_s3_access_key_id=bucket.access_key_id,
        files_s3_secret_access_key=bucket.secret_access_key,
        files_s3_prefix=bucket.prefix,
    )
    with api_client(settings, monkeypatch) as client:
        state(client).nets.add("alice", net_name(NET), stage(tmp_path, NET))
        assert client.get(url(), headers={"Range": "bytes=0-9"}).content == NET[:10]
        key = f"arbiter/nets/{net_name(NET)}/{hashlib.sha256(NET).hexdigest()}"
        # The last byte, in the second chunk, which no download has read yet
        # (a chunk is checked when first read, not on every read).
        s3_bucket.put(key, NET[:-1] + b"!")
        damaged = client.get(url(), headers={"Range": "bytes=-1"})
        intact = client.get(url(), headers={"Range": "bytes=0-9"})
    assert damaged.status_code == 500
    assert damaged.json()["error"].endswith("chunk 1 is damaged: the server's copy is damaged")
    assert (intact.status_code, intact.content) == (206, NET[:10])


def test_a_bucket_that_stops_answering_makes_a_download_a_503(
    tmp_path: Path, database_url: str, s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    with api_client(api_settings(tmp_path, database_url), monkeypatch) as client:
        library = state(client).nets
        dead = replace(s3_bucket.settings(), endpoint=f"http://127.0.0.1:{closed_port()}")
        library.files = BucketFiles(state(client).storage, Bucket(s3_bucket.settings()))
        library.add("alice", net_name(NET), stage(tmp_path, NET))
        library.files = BucketFiles(state(client).storage, Bucket(dead))
        reply = client.get(url())
    assert reply.status_code == 503
    assert reply.headers["retry-after"] == "5"
    assert reply.json()["error"].endswith(": the file store does not answer; retry shortly")
