"""Nets and books in an S3-compatible bucket (a local moto server): uploaded
whole and checked before their row is written, read back chunk by checked
chunk, a damaged or missing object refused, files already in the database's
chunks still served, and the data-dir import writing to the bucket."""

import hashlib
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.files.bucket_files import BucketFiles, object_key
from arbiter.domain.files.data_dir_import import import_data_dir_files
from arbiter.domain.files.nets import NetLibrary
from arbiter.domain.files.stored import (
    BOOK,
    CHUNK_BYTES,
    NET,
    DamagedFile,
    FileUnavailable,
    StoredFile,
    chunk_count,
)
from arbiter.storage import Storage, Tx
from arbiter.storage.object_store import Bucket
from tests.domain.files.support import stage
from tests.domain.files.test_data_dir_import import NET_BYTES, old_layout
from tests.domain.support import Clock
from tests.s3_server import S3Bucket

DATA = bytes(range(256)) * (CHUNK_BYTES // 256) + b"the second chunk"
NAME = f"nn-{hashlib.sha256(DATA).hexdigest()[:12]}.nnue"
SHA256 = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def files(storage: Storage, s3_bucket: S3Bucket) -> BucketFiles:
    return BucketFiles(storage, Bucket(s3_bucket.settings()))


@pytest.fixture
def nets(storage: Storage, clock: Clock, files: BucketFiles) -> NetLibrary:
    return NetLibrary(storage, clock, files=files)


def read_all(files: BucketFiles, file: StoredFile) -> bytes:
    return b"".join(files.read_chunk(file, seq) for seq in range(chunk_count(file.size)))


def chunks_in_database(storage: Storage, kind: str, name: str) -> int:
    with storage.read() as tx:
        return tx.file_chunks.count(kind, name)


def test_an_upload_is_an_object_and_its_manifest_and_nothing_in_the_database(
    nets: NetLibrary, files: BucketFiles, storage: Storage, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    nets.add("alice", NAME, stage(tmp_path, DATA))
    _net, stored = nets.open_for_download(NAME, count=False)
    key = f"arbiter/nets/{NAME}/{SHA256}"
    assert s3_bucket.object_keys() == [key, f"{key}.chunks"]
    assert chunks_in_database(storage, NET, NAME) == 0
    assert read_all(files, stored) == DATA
    assert files.is_stored(stored)


def test_a_book_key_spells_its_sri_in_hex(
    storage: Storage, files: BucketFiles, tmp_path: Path
) -> None:
    books = BookLibrary(storage, tmp_path / "books", files=files)
    data = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"
    books.add("alice", "e4.epd", stage(tmp_path, data))
    _book, stored = books.open_for_download("e4.epd")
    digest = hashlib.sha384(data).hexdigest()
    assert object_key(stored) == f"books/e4.epd/sha384-{digest}"
    assert read_all(files, stored) == data


def test_a_damaged_object_is_refused_chunk_by_chunk(
    nets: NetLibrary, storage: Storage, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    nets.add("alice", NAME, stage(tmp_path, DATA))
    _net, stored = nets.open_for_download(NAME, count=False)
    damaged = b"X" + DATA[1:]  # same size, first chunk changed
    s3_bucket.put(f"arbiter/{object_key(stored)}", damaged)
    fresh = BucketFiles(storage, Bucket(s3_bucket.settings()))
    with pytest.raises(DamagedFile, match="chunk 0 is damaged"):
        fresh.read_chunk(stored, 0)
    assert fresh.read_chunk(stored, 1) == DATA[CHUNK_BYTES:]  # the untouched chunk


def test_a_missing_object_is_a_damaged_file(
    nets: NetLibrary, files: BucketFiles, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    nets.add("alice", NAME, stage(tmp_path, DATA))
    _net, stored = nets.open_for_download(NAME, count=False)
    s3_bucket.server.client().delete_object(
        Bucket=s3_bucket.name, Key=f"arbiter/{object_key(stored)}"
    )
    with pytest.raises(DamagedFile, match="chunk 1 is missing"):
        files.read_chunk(stored, 1)


def test_a_refused_record_stores_no_row_and_leaves_at_most_an_orphan(
    files: BucketFiles, storage: Storage, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    staged = stage(tmp_path, DATA)
    stored = StoredFile(NET, NAME, len(DATA), SHA256)

    def refuse(tx: Tx) -> None:
        raise RuntimeError("the commit failed")

    with pytest.raises(RuntimeError):
        files.publish(stored, staged.path, refuse)
    with storage.read() as tx:
        assert tx.nets.get(NAME) is None
    assert len(s3_bucket.object_keys()) == 2  # the orphan: named by its content, harmless


def test_a_second_upload_of_a_name_is_refused_before_any_byte_moves(
    nets: NetLibrary, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    nets.add("alice", NAME, stage(tmp_path, DATA))
    before = s3_bucket.object_keys()
    with pytest.raises(ValidationError, match="already uploaded"):
        nets.add("bob", NAME, stage(tmp_path, DATA))
    assert s3_bucket.object_keys() == before


def test_files_kept_in_the_database_before_the_bucket_are_still_served(
    storage: Storage, clock: Clock, files: BucketFiles, tmp_path: Path
) -> None:
    NetLibrary(storage, clock).add("alice", NAME, stage(tmp_path, DATA))  # the database's chunks
    stored = StoredFile(NET, NAME, len(DATA), SHA256)
    assert files.is_stored(stored)
    assert read_all(files, stored) == DATA


@pytest.fixture
def dead_bucket(s3_bucket: S3Bucket) -> Iterator[Bucket]:
    with socket.socket() as holder:  # bound, never listening: connections refused
        holder.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{holder.getsockname()[1]}"
        yield Bucket(replace(s3_bucket.settings(), endpoint=endpoint))


def test_an_unreachable_bucket_is_unavailable_and_records_nothing(
    storage: Storage, clock: Clock, dead_bucket: Bucket, tmp_path: Path
) -> None:
    nets = NetLibrary(storage, clock, files=BucketFiles(storage, dead_bucket))
    with pytest.raises(FileUnavailable, match="the file store does not answer"):
        nets.add("alice", NAME, stage(tmp_path, DATA))
    with storage.read() as tx:
        assert tx.nets.get(NAME) is None
    with pytest.raises(FileUnavailable):
        nets.files.read_chunk(StoredFile(NET, NAME, len(DATA), SHA256), 0)


def test_the_data_dir_import_writes_to_the_bucket(
    storage: Storage, files: BucketFiles, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    net_name, _book = old_layout(storage, tmp_path)
    report = import_data_dir_files(storage, tmp_path, files)
    assert report.imported == [f"net {net_name}"]
    stored = StoredFile(NET, net_name, len(NET_BYTES), hashlib.sha256(NET_BYTES).hexdigest())
    assert read_all(files, stored) == NET_BYTES
    assert chunks_in_database(storage, NET, net_name) == 0
    assert chunks_in_database(storage, BOOK, "e4.epd") == 0
    assert import_data_dir_files(storage, tmp_path, files).imported == []


def test_delete_removes_the_object_its_manifest_and_any_database_chunks(
    storage: Storage, clock: Clock, files: BucketFiles, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    NetLibrary(storage, clock).add("alice", NAME, stage(tmp_path, DATA))  # chunks in the database
    stored = StoredFile(NET, NAME, len(DATA), SHA256)
    files.publish(stored, stage(tmp_path, DATA).path, record=lambda tx: None)
    assert len(s3_bucket.object_keys()) == 2
    files.delete(stored)
    assert s3_bucket.object_keys() == []
    assert not files.is_stored(stored)
    assert chunks_in_database(storage, NET, NAME) == 0
