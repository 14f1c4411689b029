"""Nets' and books' bytes in an S3-compatible bucket (`ARBITER_FILES_S3_*`).

Each file is an object named by its kind, name and hash
(`nets/<name>/<sha256 hex>`, `books/<name>/sha384-<hex of its sri>`) beside a small
manifest (`<key>.chunks`: the SHA-256 of each CHUNK_BYTES), so a download
reads only the chunks a Range covers and checks each before its bytes first
leave the server; a chunk checked once is later read only as far as the
request wants, as with the database's chunks. Publishing uploads the object and
its manifest, reads the object back against the manifest, and only then
commits the row: a name never points at a partial object. When that commit
fails the object stays behind as an orphan, never deleted here: its key is its
content, so a concurrent upload of the same file that did commit may be using
it. Files whose bytes are in the database's chunks (stored before a bucket was
configured, or by `arbiter import fishtest`) are still served from there.
[THREAD]: every method blocks on the network.
"""

import base64
import hashlib
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from arbiter.domain.files.stored import (
    BOOK,
    CHUNK_BYTES,
    CheckedChunks,
    DamagedFile,
    DatabaseFiles,
    FileUnavailable,
    Record,
    Span,
    StoredFile,
    chunk_hashes,
    chunk_key,
    cut,
)
from arbiter.storage import Storage
from arbiter.storage.object_store import Bucket, NoSuchObject, ObjectStoreError

log = logging.getLogger("arbiter.files")

MANIFEST = ".chunks"
MANIFESTS_KEPT = 1024  # files are immutable, so a manifest read once stays true


def object_key(file: StoredFile) -> str:
    """`<kind>s/<name>/<hash in hex>`: a book's sri (base64 of a SHA-384 of its
    text with normalised line ends) as `sha384-<hex>`, since base64 holds a '/'."""
    if file.kind == BOOK:
        return f"books/{file.name}/sha384-{base64.b64decode(file.etag).hex()}"
    return f"{file.kind}s/{file.name}/{file.etag}"


class BucketFiles:
    def __init__(self, storage: Storage, bucket: Bucket) -> None:
        self._storage = storage
        self._bucket = bucket
        self._database = DatabaseFiles(storage)
        self._manifests: dict[StoredFile, list[str]] = {}
        self._lock = threading.Lock()
        self._checked = CheckedChunks()

    def publish(self, file: StoredFile, source: Path, record: Record) -> None:
        hashes = chunk_hashes(source)
        key = object_key(file)
        manifest = {"size": file.size, "chunk_bytes": CHUNK_BYTES, "sha256": hashes}
        with _unavailable():
            self._bucket.put_file(key, source)
            self._bucket.put_bytes(key + MANIFEST, json.dumps(manifest).encode())
            self._check_uploaded(key, hashes)
        with self._storage.write() as tx:
            record(tx)

    def _check_uploaded(self, key: str, hashes: list[str]) -> None:
        read = [
            hashlib.sha256(piece).hexdigest() for piece in self._bucket.pieces(key, CHUNK_BYTES)
        ]
        if read != hashes:
            raise ObjectStoreError(f"object store: {key} does not read back as it was written")

    def read_chunk(self, file: StoredFile, seq: int, span: Span = None) -> bytes:
        with _unavailable():
            hashes = self._manifest(file)
            if hashes is None:
                return self._database.read_chunk(file, seq, span)
            if not 0 <= seq < len(hashes):
                raise DamagedFile(f"{file.name}: chunk {seq} is missing")
            start = seq * CHUNK_BYTES
            end = min(start + CHUNK_BYTES, file.size) - 1
            key = chunk_key(file, seq)
            if key in self._checked:
                low, high = span or (0, end - start + 1)
                return self._read(file, seq, start + low, start + high - 1)
            data = self._read(file, seq, start, end)
        if hashlib.sha256(data).hexdigest() != hashes[seq]:
            log.error("%s %s: chunk %d does not match its SHA-256", file.kind, file.name, seq)
            raise DamagedFile(f"{file.name}: chunk {seq} is damaged")
        self._checked.add(key)
        return cut(data, span)

    def _read(self, file: StoredFile, seq: int, first: int, last: int) -> bytes:
        """Bytes first..last (inclusive) of the file's object."""
        try:
            return self._bucket.read(object_key(file), first, last)
        except NoSuchObject:
            log.error("%s %s: its object is missing", file.kind, file.name)
            raise DamagedFile(f"{file.name}: chunk {seq} is missing") from None

    def is_stored(self, file: StoredFile) -> bool:
        with _unavailable():
            size = self._bucket.size(object_key(file))
            manifest = self._bucket.size(object_key(file) + MANIFEST)
        if size == file.size and manifest is not None:
            return True
        return self._database.is_stored(file)

    def delete(self, file: StoredFile) -> None:
        with _unavailable():
            self._bucket.delete(object_key(file))
            self._bucket.delete(object_key(file) + MANIFEST)
        with self._lock:
            self._manifests.pop(file, None)
        self._checked.forget(file)
        self._database.delete(file)

    def _manifest(self, file: StoredFile) -> list[str] | None:
        """The chunks' hashes, None when the bucket has no such file."""
        with self._lock:
            known = self._manifests.get(file)
        if known is not None:
            return known
        try:
            raw = self._bucket.read(object_key(file) + MANIFEST)
        except NoSuchObject:
            return None
        hashes = _parse_manifest(file, raw)
        with self._lock:
            if len(self._manifests) >= MANIFESTS_KEPT:
                self._manifests.clear()
            self._manifests[file] = hashes
        return hashes


def _parse_manifest(file: StoredFile, raw: bytes) -> list[str]:
    try:
        manifest = json.loads(raw)
        hashes = [str(digest) for digest in manifest["sha256"]]
        fits = manifest["size"] == file.size and manifest["chunk_bytes"] == CHUNK_BYTES
    except (ValueError, KeyError, TypeError):
        fits, hashes = False, []
    if not fits:
        log.error("%s %s: its manifest is damaged", file.kind, file.name)
        raise DamagedFile(f"{file.name}: its list of chunk hashes is damaged")
    return hashes


@contextmanager
def _unavailable() -> Iterator[None]:
    """An unreachable bucket as FileUnavailable, which the API answers with a 503:
    the details (endpoint, key) go to the log, not to whoever asked."""
    try:
        yield
    except ObjectStoreError as error:
        log.warning("%s", error)
        raise FileUnavailable("the file store does not answer; retry shortly") from error
