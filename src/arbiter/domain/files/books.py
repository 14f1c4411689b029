"""Opening books: EPD or PGN files with their SRI hash, which workers verify.

The scheduler asks `sri(name)` under its lock for every task it hands out, so
the hashes are kept in memory (loaded at start-up, updated on upload).
Other methods run in the threadpool (disk and database I/O).
"""

import re
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from arbiter.domain.actions import SYSTEM_USER, record
from arbiter.domain.errors import NotFound, ValidationError
from arbiter.domain.files.book_check import count_positions
from arbiter.domain.files.staging import StagedUpload, StagingFile, publish
from arbiter.domain.run_args import DEFAULT_BOOK  # shipped, see scripts/make_default_book.py
from arbiter.storage import Storage
from arbiter.storage.errors import DuplicateKey
from arbiter.storage.records import BookRecord

BOOK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,100}\.(epd|pgn)$")
_BUNDLED = resources.files("arbiter") / "data" / "books"


def check_book_name(name: str) -> None:
    if not BOOK_NAME.match(name):
        raise ValidationError(
            "name", "A book name is letters, digits, '.', '_', '+' or '-', ending .epd or .pgn"
        )


class BookLibrary:
    def __init__(
        self, storage: Storage, directory: Path, clock: Callable[[], float] = time.time
    ) -> None:
        self._storage = storage
        self.directory = directory
        self._clock = clock
        self._sris: dict[str, str] = {}

    def load(self) -> int:
        """Read every book's hash into memory; returns how many books there are."""
        with self._storage.read() as tx:
            books = tx.books.list()
        # One assignment: readers on other threads see the old or the new map.
        self._sris = {book.name: book.sri for book in books}
        return len(books)

    def sri(self, name: str) -> str | None:
        """Safe from any thread, never blocks."""
        return self._sris.get(name)

    def known(self, name: str) -> bool:
        return name in self._sris

    def add(self, username: str, name: str, staged: StagedUpload) -> BookRecord:
        """Validate and publish an upload; the staging file is gone afterwards either way."""
        try:
            check_book_name(name)
            book = BookRecord(
                name=name,
                username=username,
                sri=staged.sri,
                size=staged.size,
                total=count_positions(staged.path, name),
                uploaded_at=self._clock(),
            )
            self._commit(book, staged)
            self._sris = {**self._sris, name: book.sri}
            return book
        finally:
            staged.discard()

    def _commit(self, book: BookRecord, staged: StagedUpload) -> None:
        try:
            with self._storage.write() as tx:
                tx.books.add(book)
                message = f"{book.name} ({book.total} positions, {book.size} bytes)"
                record(
                    tx,
                    time=book.uploaded_at,
                    action="upload_book",
                    username=book.username,
                    message=message,
                )
                publish(staged, self.path_of(book.name))
        except DuplicateKey:
            raise ValidationError("name", f"{book.name} is already uploaded") from None

    def install_bundled(self) -> bool:
        """Add the book shipped with Arbiter unless it is there; True if added."""
        if self.known(DEFAULT_BOOK) and self.path_of(DEFAULT_BOOK).is_file():
            return False
        staging = StagingFile(self.directory / ".staging", limit=1 << 30)
        with (_BUNDLED / DEFAULT_BOOK).open("rb") as source:
            for chunk in iter(lambda: source.read(1 << 16), b""):
                staging.write(chunk)
        staged = staging.finish()
        if self.known(DEFAULT_BOOK):
            # Row present, file lost (a fresh data dir on a shared database).
            publish(staged, self.path_of(DEFAULT_BOOK))
            return False
        self.add(SYSTEM_USER, DEFAULT_BOOK, staged)
        return True

    def path_of(self, name: str) -> Path:
        return self.directory / name

    def list(self) -> list[BookRecord]:
        with self._storage.read() as tx:
            return tx.books.list()

    def path_for_download(self, name: str) -> Path:
        path = self.path_of(name)
        if not BOOK_NAME.match(name) or not self.known(name) or not path.is_file():
            raise NotFound(f"Unknown book {name}")
        return path
