"""Uploads land in a staging file first, hashed as they stream in.

The web layer feeds request chunks to `StagingFile.write` (each call in the
threadpool: it writes to disk); the domain then validates the finished file and
moves it into place with one rename, so a half-received upload is never
visible under its final name, and a refused one leaves nothing behind.
"""

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from arbiter.protocol.books import BookHasher


@dataclass(frozen=True, slots=True)
class StagedUpload:
    path: Path
    size: int
    sha256: str  # hex
    sri: str  # the `book_sri` workers verify when the upload is a book (protocol.books)

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


class StagingFile:
    def __init__(self, directory: Path, limit: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=directory, prefix="upload-", suffix=".part")
        self._file: BinaryIO = os.fdopen(handle, "wb")
        self._path = Path(name)
        self._limit = limit
        self._size = 0
        self._sha256 = hashlib.sha256()
        self._book = BookHasher()

    @property
    def too_large(self) -> bool:
        return self._size > self._limit

    def write(self, chunk: bytes) -> None:
        """Blocking; call from the threadpool. Past the limit, only counts."""
        self._size += len(chunk)
        if self.too_large:
            return
        self._file.write(chunk)
        self._sha256.update(chunk)
        self._book.update(chunk)

    def finish(self) -> StagedUpload:
        """Flush to disk (the rename that follows must not publish a torn file)."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return StagedUpload(self._path, self._size, self._sha256.hexdigest(), self.sri)

    @property
    def sri(self) -> str:
        return self._book.sri()

    def abort(self) -> None:
        self._file.close()
        self._path.unlink(missing_ok=True)


def publish(staged: StagedUpload, destination: Path) -> None:
    """Move a validated upload to its final name, durably."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staged.path.replace(destination)
    directory = os.open(destination.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
