"""A mongodump directory read one document at a time.

mongodump writes `<out>/<database>/<collection>.bson` (`.bson.gz` with
`--gzip`), each file a plain concatenation of BSON documents, beside an
optional `.metadata.json`. Documents are decoded one by one (pymongo's
`bson.decode_file_iter`), so memory stays constant whatever the file's size;
the uncompressed offset after each document is where a resumed import seeks.
"""

import gzip
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import IO, Any

from bson import decode_file_iter
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.errors import BSONError

# Aware UTC datetimes (a naive one would be read as local time); dates outside
# Python's range come as DatetimeMS instead of failing the whole file.
CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(
    tz_aware=True, tzinfo=UTC, datetime_conversion=DatetimeConversion.DATETIME_AUTO
)
PREFERRED_DATABASES = ("fishtest_new", "fishtest")
_FINGERPRINT_BYTES = 1 << 16


class DumpError(Exception):
    """The directory is not a readable dump (the operator's input)."""


class BadDocument(Exception):  # noqa: N818 - named for what happened
    """The file stops being BSON at `offset` (truncated or corrupt)."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"not BSON after byte {offset}: {reason}")
        self.offset = offset


@dataclass(frozen=True, slots=True)
class CollectionFile:
    name: str
    path: Path

    @property
    def gzipped(self) -> bool:
        return self.path.name.endswith(".gz")

    @property
    def size(self) -> int:
        """Bytes on disk: what the progress bar counts."""
        return self.path.stat().st_size


def _collections_in(directory: Path) -> dict[str, CollectionFile]:
    found: dict[str, CollectionFile] = {}
    for path in sorted(directory.iterdir()):
        for suffix in (".bson", ".bson.gz"):
            if path.is_file() and path.name.endswith(suffix):
                name = path.name[: -len(suffix)]
                found[name] = CollectionFile(name, path)
    return found


def find_collections(dump_dir: Path) -> dict[str, CollectionFile]:
    """The collection files of one database: `dump_dir` itself, or the one
    database directory inside it (`fishtest_new` when there are several)."""
    if not dump_dir.is_dir():
        raise DumpError(f"{dump_dir} is not a directory")
    # `mongodump --oplog` adds oplog.bson beside the database directories.
    direct = {name: file for name, file in _collections_in(dump_dir).items() if name != "oplog"}
    if direct:
        return direct
    databases = {
        path.name: files
        for path in sorted(dump_dir.iterdir())
        if path.is_dir() and (files := _collections_in(path))
    }
    for name in PREFERRED_DATABASES:
        if name in databases:
            return databases[name]
    if len(databases) == 1:
        return next(iter(databases.values()))
    if not databases:
        raise DumpError(f"{dump_dir} holds no .bson or .bson.gz files")
    raise DumpError(
        f"{dump_dir} holds several databases ({', '.join(databases)}): name the one to import"
    )


def fingerprint(files: dict[str, CollectionFile]) -> str:
    """Tells one dump from another: each file's name, size and first 64 KiB."""
    digest = hashlib.sha256()
    for name in sorted(files):
        path = files[name].path
        digest.update(f"{name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as raw:
            digest.update(raw.read(_FINGERPRINT_BYTES))
    return digest.hexdigest()


class DocumentStream:
    """The documents of one file from an (uncompressed) offset on.

    Iterating yields (document, offset after it); `disk_position` is how far
    into the file on disk reading has come (for the progress bar)."""

    def __init__(self, file: CollectionFile, offset: int = 0) -> None:
        self._raw = file.path.open("rb")
        self._stream: IO[bytes] = (
            gzip.GzipFile(fileobj=self._raw) if file.gzipped else self._raw  # type: ignore[assignment]
        )
        if offset:
            self._stream.seek(offset)
        self._offset = offset

    def __enter__(self) -> "DocumentStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()
        self._raw.close()

    @property
    def disk_position(self) -> int:
        return self._raw.tell()

    def __iter__(self) -> Iterator[tuple[dict[str, Any], int]]:
        documents = decode_file_iter(self._stream, CODEC_OPTIONS)
        while True:
            try:
                document = next(documents)
            except StopIteration:
                return
            except (BSONError, EOFError, OSError, ValueError) as error:
                raise BadDocument(self._offset, str(error) or type(error).__name__) from None
            # decode_file_iter reads exactly one document per step.
            self._offset = self._stream.tell()
            yield document, self._offset
