"""Opening books: the ones Arbiter hosts (uploaded, or shipped) and the catalogue
of official-stockfish/books (`book_catalogue`), each with the `book_sri`
workers verify (`protocol.books`).

A run names a book of either kind. A catalogue book can go to any worker (the
official Fishtest worker fetches it from that repository; ours from this
server when it hosts a copy, else from there); a book only Arbiter hosts can
go only to workers that download books from the server (`hosted_books` in
their worker_info).

The scheduler asks `sri(name)` and `in_catalogue(name)` for every task it
hands out, so both are kept in memory (loaded at start-up, updated on upload,
on import and by `reload_catalogue`). Other methods run in the threadpool or
the job executor (disk and database I/O).
"""

import functools
import logging
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Protocol

from arbiter.domain.actions import SYSTEM_USER, record
from arbiter.domain.errors import NotFound, ValidationError
from arbiter.domain.files.book_catalogue import (
    KV_KEY,
    REFERENCE_DEFAULT_BOOK,
    Catalogue,
    CatalogueBook,
    catalogue_document,
    parse_catalogue,
    shipped_catalogue,
)
from arbiter.domain.files.book_check import count_positions
from arbiter.domain.files.staging import StagedUpload, StagingFile
from arbiter.domain.files.stored import BOOK, DatabaseFiles, FileStore, StoredFile
from arbiter.domain.files.upload_quota import NO_QUOTA, UploadQuota
from arbiter.domain.run_args import DEFAULT_BOOK  # shipped, see scripts/make_default_book.py
from arbiter.storage import Storage, Tx
from arbiter.storage.base import NewAction
from arbiter.storage.errors import DuplicateKey
from arbiter.storage.records import BookRecord

log = logging.getLogger(__name__)

FETCHABLE_KEY = "book_catalogue_fetchable"  # kv: the last check's answer, for every process
FETCH_CHECK_SECONDS = 10.0
BOOK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,100}\.(epd|pgn)\Z")  # \Z: no final newline
_BUNDLED = resources.files("arbiter") / "data" / "books"


class BookIndex(Protocol):
    """What the runs service asks of the books: submission and scheduling.
    Every method is safe from any thread and never blocks."""

    def sri(self, name: str) -> str | None: ...
    def known(self, name: str) -> bool: ...
    def in_catalogue(self, name: str) -> bool: ...
    def catalogue_version(self) -> int: ...
    def default_book(self) -> str: ...


class AnyBook:
    """A `BookIndex` for services built without a library (tests, benchmarks): every
    book is known and fetchable by every worker, and none has a hash."""

    def sri(self, name: str) -> str | None:
        return None

    def known(self, name: str) -> bool:
        return True

    def in_catalogue(self, name: str) -> bool:
        return True

    def catalogue_version(self) -> int:
        return 0

    def default_book(self) -> str:
        return DEFAULT_BOOK


def _answers_ok(url: str) -> bool:
    """Whether a HEAD of `url` ends in a 200 (redirects followed). [blocking]"""
    if not url.startswith(("http://", "https://")):
        return False
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "arbiter"})  # noqa: S310 (http(s) only, above)
    try:
        with urllib.request.urlopen(request, timeout=FETCH_CHECK_SECONDS) as reply:  # noqa: S310
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def check_book_name(name: str) -> None:
    if not BOOK_NAME.match(name):
        raise ValidationError(
            "name", "A book name is letters, digits, '.', '_', '+' or '-', ending .epd or .pgn"
        )


@functools.cache
def _bundled_positions() -> int:
    """The shipped book's positions, counted once per process: it is installed
    into every new data directory, and checking its thousand positions took
    120 ms each time (a test suite makes hundreds of data directories)."""
    with resources.as_file(_BUNDLED / DEFAULT_BOOK) as path:
        return count_positions(path, DEFAULT_BOOK)


class BookLibrary:
    def __init__(
        self,
        storage: Storage,
        directory: Path,
        clock: Callable[[], float] = time.time,
        *,
        files: FileStore | None = None,
        quota: UploadQuota = NO_QUOTA,
        books_url: str = "",
    ) -> None:
        """`books_url`: where workers fetch the catalogue's books, which
        `check_catalogue_fetchable` tries; empty, they are taken to be fetchable."""
        self._storage = storage
        self._books_url = books_url.rstrip("/")
        # Until a check answers, a catalogue book is proposed only if none is asked for.
        self._catalogue_fetchable = not self._books_url
        self.files = files or DatabaseFiles(storage)
        self._quota = quota
        self.directory = directory
        self._clock = clock
        self._sris: dict[str, str] = {}  # hosted books
        self._catalogue: Catalogue = {}
        self._catalogue_version = 0  # moves on with every change of the catalogue

    def load(self) -> int:
        """Read every hosted book's hash and the catalogue into memory; returns how
        many books Arbiter hosts."""
        with self._storage.read() as tx:
            books = tx.books.list()
            stored = tx.kv.get(KV_KEY)
            fetchable = tx.kv.get(FETCHABLE_KEY)
        if self._books_url and fetchable is not None:
            self._catalogue_fetchable = bool(fetchable)
        # One assignment each: readers on other threads see the old or the new map.
        self._sris = {book.name: book.sri for book in books}
        self._set_catalogue(shipped_catalogue() if stored is None else parse_catalogue(stored))
        return len(books)

    def reload_catalogue(self) -> int:
        """Pick up a catalogue another process imported (a job); returns its size."""
        with self._storage.read() as tx:
            stored = tx.kv.get(KV_KEY)
        if stored is not None:
            catalogue = parse_catalogue(stored)
            if catalogue != self._catalogue:
                self._set_catalogue(catalogue)
        return len(self._catalogue)

    def _set_catalogue(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue
        self._catalogue_version += 1

    # Safe from any thread, never block: the scheduler calls these.

    def sri(self, name: str) -> str | None:
        """The `book_sri` of a run's book. A catalogue book's is the catalogue's
        (a hosted copy must match it, see `add`)."""
        entry = self._catalogue.get(name)
        return entry.sri if entry is not None else self._sris.get(name)

    def known(self, name: str) -> bool:
        return name in self._catalogue or name in self._sris

    def in_catalogue(self, name: str) -> bool:
        return name in self._catalogue

    def catalogue_version(self) -> int:
        return self._catalogue_version

    def is_hosted(self, name: str) -> bool:
        return name in self._sris

    def default_book(self) -> str:
        """The book a new run gets when it names none: the reference's default while
        the catalogue has it and workers can fetch it, else the one Arbiter ships
        (which every Arbiter worker gets from this server, network or not)."""
        if self._catalogue_fetchable and REFERENCE_DEFAULT_BOOK in self._catalogue:
            return REFERENCE_DEFAULT_BOOK
        return DEFAULT_BOOK

    def check_catalogue_fetchable(self) -> bool:
        """Try to fetch the reference's default book where workers fetch it (a HEAD
        of its zip) and remember the answer here and for other processes. An
        offline machine gets the shipped book as its default. [job executor]"""
        if not self._books_url:
            return True
        fetchable = _answers_ok(f"{self._books_url}/{REFERENCE_DEFAULT_BOOK}.zip")
        if fetchable != self._catalogue_fetchable:
            log.info(
                "the catalogue's books %s fetchable from %s: the default book is now %s",
                "are" if fetchable else "are not", self._books_url,
                REFERENCE_DEFAULT_BOOK if fetchable else DEFAULT_BOOK,
            )  # fmt: skip
            with self._storage.write() as tx:
                tx.kv.set(FETCHABLE_KEY, fetchable)
            self._catalogue_fetchable = fetchable
        return fetchable

    def catalogue(self) -> list[CatalogueBook]:
        return [self._catalogue[name] for name in sorted(self._catalogue)]

    def import_catalogue(self, document: Mapping[str, object], username: str) -> int:
        """Replace the catalogue with a `books.json` document; returns its size.
        Nothing changes when the document is invalid (ValidationError)."""
        catalogue = parse_catalogue(document)
        with self._storage.write() as tx:
            tx.kv.set(KV_KEY, catalogue_document(catalogue))
            record(
                tx,
                NewAction(
                    time=self._clock(),
                    action="system_event",
                    username=username,
                    message=f"book catalogue imported: {len(catalogue)} books",
                ),
            )
        self._set_catalogue(catalogue)
        return len(catalogue)

    def check_quota(self, username: str, adding: int = 0) -> None:
        """Refuse, before its bytes are received, an upload of `adding` bytes
        for which the account's daily quota has no room."""
        with self._storage.read() as tx:
            self._quota.check(tx, username, self._clock(), adding)

    def add(self, username: str, name: str, staged: StagedUpload) -> BookRecord:
        """Validate and publish an upload; the staging file is gone afterwards either way."""
        return self._add(username, name, staged, self._quota)

    def _add(
        self,
        username: str,
        name: str,
        staged: StagedUpload,
        quota: UploadQuota,
        total: int | None = None,
    ) -> BookRecord:
        """`total`: the positions, when they were counted already."""
        try:
            check_book_name(name)
            self._check_against_catalogue(name, staged.sri)
            book = BookRecord(
                name=name,
                username=username,
                sri=staged.sri,
                size=staged.size,
                total=count_positions(staged.path, name) if total is None else total,
                uploaded_at=self._clock(),
            )
            self._commit(book, staged, quota)
            self._sris = {**self._sris, name: book.sri}
            return book
        finally:
            staged.discard()

    def _check_against_catalogue(self, name: str, sri: str) -> None:
        """A hosted copy of a catalogue book must be that book: workers fetching it
        from either place check the same `book_sri`."""
        entry = self._catalogue.get(name)
        if entry is not None and entry.sri != sri:
            raise ValidationError(
                "file", f"{name} is a catalogue book and this file is not it (its sri differs)"
            )

    def _commit(self, book: BookRecord, staged: StagedUpload, quota: UploadQuota) -> None:
        def write_record(tx: Tx) -> None:
            quota.check(tx, book.username, book.uploaded_at, adding=book.size)
            tx.books.add(book)
            record(
                tx,
                NewAction(
                    time=book.uploaded_at,
                    action="upload_book",
                    username=book.username,
                    message=f"{book.name} ({book.total} positions, {book.size} bytes)",
                ),
            )

        already = ValidationError("name", f"{book.name} is already uploaded")
        with self._storage.read() as tx:
            if tx.books.get(book.name) is not None:  # before sending bytes anywhere
                raise already
        try:
            stored = StoredFile(BOOK, book.name, book.size, book.sri)
            self.files.publish(stored, staged.path, write_record)  # all of it or nothing
        except DuplicateKey:
            raise already from None

    def install_bundled(self) -> bool:
        """Add the book shipped with Arbiter unless it is there; True if added."""
        if self.is_hosted(DEFAULT_BOOK):
            return False
        staging = StagingFile(self.directory / ".staging", limit=1 << 30)
        with (_BUNDLED / DEFAULT_BOOK).open("rb") as source:
            for chunk in iter(lambda: source.read(1 << 16), b""):
                staging.write(chunk)
        self._add(SYSTEM_USER, DEFAULT_BOOK, staging.finish(), NO_QUOTA, _bundled_positions())
        return True

    def list(self) -> list[BookRecord]:
        with self._storage.read() as tx:
            return tx.books.list()

    def open_for_download(self, name: str) -> tuple[BookRecord, StoredFile]:
        """The book and how to read it, from the database: a book uploaded through
        another process since this one started is served too."""
        if not BOOK_NAME.match(name):
            raise NotFound(f"Unknown book {name}")
        with self._storage.read() as tx:
            book = tx.books.get(name)
        if book is None:
            raise NotFound(f"Unknown book {name}")
        return book, StoredFile(BOOK, name, book.size, book.sri)
