"""Moving nets and books from the data dir into their store (`arbiter db upgrade`):
the database's chunks, or the bucket when one is configured.

Before revision 0006 a net's or book's bytes were a file under the data dir
(`nets/<name>`, `books/<name>`) and only its row was in the database. Each row
whose bytes are not stored yet is filled from that file when the file is the
one the row describes (a net's SHA-256, a book's `book_sri`); a missing or
different file is reported and left alone, so an upgrade never stores wrong
bytes. Running it again does nothing more. The files are left in place (delete
them once every process runs this version). Blocking (CLI).
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from arbiter.domain.files.stored import BOOK, NET, DatabaseFiles, FileStore, StoredFile
from arbiter.protocol.books import BookHasher
from arbiter.storage import Storage

READ_BYTES = 1 << 20


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "name: why", left as they were


def import_data_dir_files(
    storage: Storage, data_dir: Path, files: FileStore | None = None
) -> ImportReport:
    """Into `files` (the configured store; the database's chunks by default)."""
    files = files or DatabaseFiles(storage)
    report = ImportReport()
    with storage.read() as tx:
        nets = [(net.name, net.size, net.sha256) for net in tx.nets.list(limit=1_000_000)]
        books = [(book.name, book.size, book.sri) for book in tx.books.list()]
    for name, size, sha256 in nets:
        wanted = Wanted(NET, name, size, sha256, _sha256)
        _import(files, wanted, data_dir / "nets" / name, report)
    for name, size, sri in books:
        wanted = Wanted(BOOK, name, size, sri, _book_sri)
        _import(files, wanted, data_dir / "books" / name, report)
    return report


@dataclass(frozen=True)
class Wanted:
    """A file as its row describes it, and how to hash a candidate the same way."""

    kind: str
    name: str
    size: int
    digest: str
    hash_of: Callable[[Path], str]


def _import(files: FileStore, wanted: Wanted, path: Path, report: ImportReport) -> None:
    kind, name, size = wanted.kind, wanted.name, wanted.size
    stored = StoredFile(kind, name, size, wanted.digest)
    if files.is_stored(stored):
        return
    if not path.is_file():
        report.problems.append(f"{kind} {name}: no file at {path} (its bytes are not stored)")
        return
    if path.stat().st_size != size or wanted.hash_of(path) != wanted.digest:
        report.problems.append(f"{kind} {name}: {path} is not the file recorded (hash differs)")
        return
    files.publish(stored, path, record=lambda tx: None)  # its row is there already
    report.imported.append(f"{kind} {name}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _book_sri(path: Path) -> str:
    hasher = BookHasher()
    with path.open("rb") as file:
        while chunk := file.read(READ_BYTES):
            hasher.update(chunk)
    return hasher.sri()
