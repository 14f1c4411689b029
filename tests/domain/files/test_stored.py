"""Files in the database's chunks: each chunk hash-checked the first time a
store reads it, and after that read only as far as a request wants, so a
one-byte Range or a repeated download hashes nothing (on both backends)."""

import hashlib
from pathlib import Path

import pytest

from arbiter.domain.files import stored as stored_module
from arbiter.domain.files.stored import (
    CHUNK_BYTES,
    NET,
    CheckedChunks,
    DamagedFile,
    DatabaseFiles,
    StoredFile,
    chunk_count,
)
from arbiter.storage import Storage

DATA = bytes(range(256)) * (CHUNK_BYTES // 256) * 2 + b"a third, short chunk"
FILE = StoredFile(NET, "nn-000000000000.nnue", len(DATA), hashlib.sha256(DATA).hexdigest())


@pytest.fixture
def files(storage: Storage, tmp_path: Path) -> DatabaseFiles:
    source = tmp_path / "net"
    source.write_bytes(DATA)
    database_files = DatabaseFiles(storage)
    database_files.publish(FILE, source, lambda tx: None)
    return database_files


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of what the module hashes, in order (the real sha256 does the work)."""
    sizes: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"") -> "hashlib._Hash":
        sizes.append(len(data))
        return real(data)

    monkeypatch.setattr(stored_module.hashlib, "sha256", counting)
    return sizes


def read_whole(files: DatabaseFiles) -> bytes:
    return b"".join(files.read_chunk(FILE, seq) for seq in range(chunk_count(FILE.size)))


def test_each_chunk_is_hashed_the_first_time_only(files: DatabaseFiles, hashed: list[int]) -> None:
    assert read_whole(files) == DATA
    assert hashed == [CHUNK_BYTES, CHUNK_BYTES, len(b"a third, short chunk")]
    for _ in range(3):
        assert read_whole(files) == DATA
    assert files.read_chunk(FILE, 1, (5, 6)) == DATA[CHUNK_BYTES + 5 : CHUNK_BYTES + 6]
    assert len(hashed) == 3


def test_a_first_range_checks_its_whole_chunk_and_returns_its_part(
    files: DatabaseFiles, hashed: list[int]
) -> None:
    assert files.read_chunk(FILE, 1, (0, 1)) == DATA[CHUNK_BYTES : CHUNK_BYTES + 1]
    assert hashed == [CHUNK_BYTES]


@pytest.mark.parametrize(
    ("seq", "span"),
    [(0, (0, 1)), (0, (CHUNK_BYTES - 1, CHUNK_BYTES)), (1, (17, 4096)), (2, (3, 20)), (2, (0, 0))],
)
def test_a_checked_chunk_gives_exactly_the_span_asked_for(
    files: DatabaseFiles, seq: int, span: tuple[int, int]
) -> None:
    read_whole(files)
    start = seq * CHUNK_BYTES
    assert files.read_chunk(FILE, seq, span) == DATA[start + span[0] : start + span[1]]


def test_a_damaged_chunk_is_refused_until_it_reads_right(
    files: DatabaseFiles, storage: Storage
) -> None:
    with storage.write() as tx:
        tx.file_chunks.delete(NET, FILE.name)
        tx.file_chunks.put(
            NET, FILE.name, 0, b"X" * CHUNK_BYTES, hashlib.sha256(DATA[:1]).hexdigest()
        )
    with pytest.raises(DamagedFile, match="chunk 0 is damaged"):
        files.read_chunk(FILE, 0, (0, 1))
    with pytest.raises(DamagedFile, match="chunk 0 is damaged"):
        files.read_chunk(FILE, 0, (0, 1))  # a refused chunk is not remembered as checked


def test_a_deleted_file_is_checked_again_when_stored_again(
    files: DatabaseFiles, tmp_path: Path, hashed: list[int]
) -> None:
    read_whole(files)
    files.delete(FILE)
    with pytest.raises(DamagedFile, match="chunk 0 is missing"):
        files.read_chunk(FILE, 0, (0, 1))
    files.publish(FILE, tmp_path / "net", lambda tx: None)
    hashed.clear()
    assert files.read_chunk(FILE, 0, (0, 1)) == DATA[:1]
    assert hashed[-1] == CHUNK_BYTES


def test_the_checked_chunks_are_bounded_and_keep_the_recently_used() -> None:
    checked = CheckedChunks(capacity=2)
    keys = [(NET, "a", "etag", seq) for seq in range(3)]
    checked.add(keys[0])
    checked.add(keys[1])
    assert keys[0] in checked  # now the most recently used
    checked.add(keys[2])
    assert (keys[0] in checked, keys[1] in checked, keys[2] in checked) == (True, False, True)
