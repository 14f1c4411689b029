"""Nets' and books' bytes where every process can read them: `FileStore`,
with the database's chunks here (`DatabaseFiles`, the default) and an
S3-compatible bucket in `bucket_files.py`.

In the database a file is stored as numbered chunks of CHUNK_BYTES (the last one shorter),
each with its SHA-256, inside the transaction that records the file, so a
name never points at a partial file. A chunk's hash is checked before its
bytes first leave the server: a damaged row is an error, never a wrong net.
A file never changes under its name and hash, so once a process has checked a
chunk (`CheckedChunks`) it reads only the bytes a request wants and hashes
nothing: a one-byte Range, or the thousandth download of a net, costs a
slice of one row, not a megabyte read and hashed. Each chunk is read in a
short read transaction of its own, so a download holds no connection or
snapshot between chunks and memory stays at one chunk (web/downloads.py
streams them, and reads only the chunks a Range covers).
[THREAD]: everything here blocks on the database.
"""

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from arbiter.domain.errors import RetryLater
from arbiter.storage import Storage
from arbiter.storage.sql import Tx

log = logging.getLogger("arbiter.files")

CHUNK_BYTES = 1024 * 1024
NET, BOOK = "net", "book"
CHUNKS_REMEMBERED = 100_000  # about 10 MB of keys: every chunk of 100 GB of files


class DamagedFile(Exception):  # noqa: N818 - named for what happened
    """A stored chunk is missing or does not hash to what was recorded."""


class FileUnavailable(RetryLater):
    """Where the bytes are kept cannot be reached now (the object store is down)."""

    def __init__(self, message: str) -> None:
        super().__init__(5.0, message)


@dataclass(frozen=True, slots=True)
class StoredFile:
    """What a download needs to know before reading: its size and validator."""

    kind: str
    name: str
    size: int
    etag: str  # a strong validator: the file's hash as its record keeps it


Record = Callable[[Tx], None]
Span = tuple[int, int] | None  # [start, stop) within one chunk; None: all of it
ChunkKey = tuple[str, str, str, int]  # kind, name, etag, seq


class CheckedChunks:
    """The chunks one process has read whole and found to match their hash,
    the most recently used CHUNKS_REMEMBERED of them. [THREAD]-safe."""

    def __init__(self, capacity: int = CHUNKS_REMEMBERED) -> None:
        self._capacity = capacity
        self._keys: OrderedDict[ChunkKey, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: ChunkKey) -> bool:
        with self._lock:
            if key not in self._keys:
                return False
            self._keys.move_to_end(key)
            return True

    def add(self, key: ChunkKey) -> None:
        with self._lock:
            self._keys[key] = None
            self._keys.move_to_end(key)
            while len(self._keys) > self._capacity:
                self._keys.popitem(last=False)

    def forget(self, file: StoredFile) -> None:
        with self._lock:
            for key in [key for key in self._keys if key[:3] == _file_key(file)]:
                del self._keys[key]


def chunk_key(file: StoredFile, seq: int) -> ChunkKey:
    return (*_file_key(file), seq)


def _file_key(file: StoredFile) -> tuple[str, str, str]:
    return file.kind, file.name, file.etag


def cut(data: bytes, span: Span) -> bytes:
    return data if span is None else data[span[0] : span[1]]


class FileStore(Protocol):
    """Where nets' and books' bytes are kept. [THREAD]: every method blocks."""

    def publish(self, file: StoredFile, source: Path, record: Record) -> None:
        """Keep `source` as `file`'s bytes and run `record` (which writes the
        file's row) in a write transaction, so that the row never names bytes
        that are not all there. `record` raising stores no row."""
        ...

    def read_chunk(self, file: StoredFile, seq: int, span: Span = None) -> bytes:
        """Chunk `seq` (CHUNK_BYTES each, the last shorter), or the `span` of it
        (start, stop) when given; its whole chunk hash-checked the first time
        this store reads it: DamagedFile when missing or wrong,
        FileUnavailable when unreachable."""
        ...

    def is_stored(self, file: StoredFile) -> bool: ...

    def delete(self, file: StoredFile) -> None: ...


class DatabaseFiles:
    """Bytes in the database's `file_chunks`, written in the record's transaction."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._checked = CheckedChunks()

    def publish(self, file: StoredFile, source: Path, record: Record) -> None:
        with self._storage.write() as tx:
            record(tx)
            tx.file_chunks.delete(file.kind, file.name)  # a partial copy, if any
            store(tx, file.kind, file.name, source)

    def read_chunk(self, file: StoredFile, seq: int, span: Span = None) -> bytes:
        key = chunk_key(file, seq)
        if key in self._checked:
            with self._storage.read() as tx:
                found = tx.file_chunks.get_part(file.kind, file.name, seq, *(span or (0, None)))
            if found is not None:
                return found
        data = read_chunk(self._storage, file, seq)
        self._checked.add(key)
        return cut(data, span)

    def is_stored(self, file: StoredFile) -> bool:
        with self._storage.read() as tx:
            return is_stored(tx, file.kind, file.name, file.size)

    def delete(self, file: StoredFile) -> None:
        with self._storage.write() as tx:
            tx.file_chunks.delete(file.kind, file.name)
        self._checked.forget(file)


def chunk_hashes(source: Path) -> list[str]:
    """The SHA-256 of each CHUNK_BYTES of `source`, as `store` records them."""
    with source.open("rb") as file:
        return [
            hashlib.sha256(chunk).hexdigest() for chunk in iter(lambda: file.read(CHUNK_BYTES), b"")
        ]


def store(tx: Tx, kind: str, name: str, source: Path) -> int:
    """Copy `source` into chunks in the caller's transaction; how many."""
    seq = 0
    with source.open("rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            tx.file_chunks.put(kind, name, seq, chunk, hashlib.sha256(chunk).hexdigest())
            seq += 1
    return seq


def is_stored(tx: Tx, kind: str, name: str, size: int) -> bool:
    """Whether every chunk of a file of `size` bytes is there."""
    return tx.file_chunks.count(kind, name) == chunk_count(size)


def chunk_count(size: int) -> int:
    return max(1, -(-size // CHUNK_BYTES)) if size else 0


def read_chunk(storage: Storage, file: StoredFile, seq: int) -> bytes:
    with storage.read() as tx:
        found = tx.file_chunks.get(file.kind, file.name, seq)
    if found is None:
        log.error("%s %s: chunk %d is missing", file.kind, file.name, seq)
        raise DamagedFile(f"{file.name}: chunk {seq} is missing")
    data, recorded = found
    if hashlib.sha256(data).hexdigest() != recorded:
        log.error("%s %s: chunk %d does not match its SHA-256", file.kind, file.name, seq)
        raise DamagedFile(f"{file.name}: chunk {seq} is damaged")
    return data
