"""Nets' and books' bytes in the database, so any process can serve them.

A file is stored as numbered chunks of CHUNK_BYTES (the last one shorter),
each with its SHA-256, inside the transaction that records the file, so a
name never points at a partial file. Reading checks each chunk's hash before
its bytes leave the server: a damaged row is an error, never a wrong net.
Each chunk is read in a short read transaction of its own, so a download
holds no connection or snapshot between chunks and memory stays at one chunk
(web/downloads.py streams them, and reads only the chunks a Range covers). [THREAD]: everything here
blocks on the database.
"""

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from arbiter.storage import Storage
from arbiter.storage.sql import Tx

log = logging.getLogger("arbiter.files")

CHUNK_BYTES = 1024 * 1024
NET, BOOK = "net", "book"


class DamagedFile(Exception):  # noqa: N818 - named for what happened
    """A stored chunk is missing or does not hash to what was recorded."""


@dataclass(frozen=True, slots=True)
class StoredFile:
    """What a download needs to know before reading: its size and validator."""

    kind: str
    name: str
    size: int
    etag: str  # a strong validator: the file's hash as its record keeps it


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
