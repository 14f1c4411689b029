import base64
import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from arbiter.domain.errors import NotFound, ValidationError
from arbiter.domain.files import book_check
from arbiter.domain.files.book_catalogue import REFERENCE_DEFAULT_BOOK
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.run_args import DEFAULT_BOOK
from arbiter.storage import Storage
from tests.domain.files.support import stage, staged_files, stored_bytes
from tests.domain.support import Clock
from tests.web.live_server import free_port

EPD = (
    b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"
    b"\n"
    b'rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq c6 c0 "Sicilian";\n'
)
PGN = b'[Event "a"]\n[Result "*"]\n\n1. e4 e5 *\n\n[Event "b"]\n[Result "*"]\n\n1. d4 d5 2. c4 *\n'


def sri(data: bytes) -> str:
    """The official worker's book_sri for a book with LF line endings."""
    return base64.b64encode(hashlib.sha384(data).digest()).decode()


@pytest.fixture
def library(storage: Storage, clock: Clock, tmp_path: Path) -> BookLibrary:
    return BookLibrary(storage, tmp_path / "books", clock)


@pytest.mark.parametrize(("name", "data", "total"), [("two.epd", EPD, 2), ("two.pgn", PGN, 2)])
def test_upload_counts_positions_and_hashes(
    library: BookLibrary, storage: Storage, tmp_path: Path, name: str, data: bytes, total: int
) -> None:
    book = library.add("alice", name, stage(tmp_path, data))
    assert (book.total, book.size, book.sri) == (total, len(data), sri(data))
    assert library.sri(name) == sri(data)
    _book, stored = library.open_for_download(name)
    assert (stored.size, stored.etag) == (len(data), sri(data))
    assert stored_bytes(storage, stored) == data
    assert staged_files(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("../evil.epd", EPD, "A book name"),
        ("book.txt", EPD, "A book name"),
        ("empty.epd", b"\n\n", "no positions"),
        ("garbage.epd", EPD + b"hello world\n", "Line 4 is not an EPD position"),
        ("illegal.epd", b"8/8/8/8/8/8/8/8 w - -\n", "not a legal position"),
        ("latin1.epd", EPD + "é\n".encode("latin-1"), "not UTF-8"),
        ("nogames.pgn", b"1. e4 e5 *\n", "no PGN games"),
        ("bad.pgn", b'[Event "x"]\n\n1. e4 e4 *\n', "Game 1"),
    ],
)
def test_refused_uploads_leave_nothing(
    library: BookLibrary, tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        library.add("alice", name, stage(tmp_path, data))
    assert library.list() == []
    assert library.sri(name) is None
    assert staged_files(tmp_path) == []


def test_only_a_sample_of_a_long_epd_book_is_parsed_fully(
    library: BookLibrary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[int] = []
    monkeypatch.setattr(book_check, "_parse_epd", lambda number, _line, _c: parsed.append(number))
    line = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"
    book = library.add("alice", "long.epd", stage(tmp_path, line * 20_000))
    assert book.total == 20_000
    assert 1000 < len(parsed) < 1500


def test_a_name_is_uploaded_once(library: BookLibrary, tmp_path: Path) -> None:
    library.add("alice", "two.epd", stage(tmp_path, EPD))
    with pytest.raises(ValidationError, match="already uploaded"):
        library.add("bob", "two.epd", stage(tmp_path, EPD))


def test_the_shipped_book_installs_once_for_every_process(
    library: BookLibrary, storage: Storage, clock: Clock, tmp_path: Path
) -> None:
    assert library.install_bundled()
    book = library.list()[0]
    assert book.name == DEFAULT_BOOK
    assert book.total >= 1000
    assert not library.install_bundled()
    # Another process, with a data dir of its own: the book is in the database.
    again = BookLibrary(storage, tmp_path / "elsewhere", clock)
    again.load()
    assert not again.install_bundled()
    _book, stored = again.open_for_download(DEFAULT_BOOK)
    assert sri(stored_bytes(storage, stored)) == book.sri


def test_load_reads_every_hash(library: BookLibrary, storage: Storage, tmp_path: Path) -> None:
    library.add("alice", "two.epd", stage(tmp_path, EPD))
    fresh = BookLibrary(storage, library.directory)
    assert fresh.sri("two.epd") is None
    assert fresh.load() == 1
    assert fresh.known("two.epd")
    assert fresh.sri("two.epd") == sri(EPD)


def test_unknown_books_are_not_found(library: BookLibrary) -> None:
    for name in ("nope.epd", "../books.epd", "x"):
        with pytest.raises(NotFound):
            library.open_for_download(name)


class BooksRepository:
    """A stand-in for the books repository on loopback: HEAD answers 200 for the
    files it holds, 404 for others."""

    def __init__(self, holds: set[str]) -> None:
        held = holds

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.send_response(200 if self.path.lstrip("/") in held else 404)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def books_repository() -> Iterator[BooksRepository]:
    repository = BooksRepository({f"{REFERENCE_DEFAULT_BOOK}.zip"})
    yield repository
    repository.close()


def checked_library(storage: Storage, tmp_path: Path, books_url: str) -> BookLibrary:
    library = BookLibrary(storage, tmp_path / "books", books_url=books_url)
    library.load()
    return library


def test_the_default_book_is_the_references_once_workers_can_fetch_it(
    storage: Storage, tmp_path: Path, books_repository: BooksRepository
) -> None:
    library = checked_library(storage, tmp_path, books_repository.url)
    assert library.default_book() == DEFAULT_BOOK  # not checked yet
    assert library.check_catalogue_fetchable()
    assert library.default_book() == REFERENCE_DEFAULT_BOOK
    # Another process (a secondary, the next start) begins from the last answer.
    assert checked_library(storage, tmp_path, books_repository.url).default_book() == (
        REFERENCE_DEFAULT_BOOK
    )


@pytest.mark.parametrize("where", ["missing", "closed"])
def test_offline_the_shipped_book_is_the_default(
    storage: Storage, tmp_path: Path, books_repository: BooksRepository, where: str
) -> None:
    url = {
        "missing": f"{books_repository.url}/elsewhere",  # answers, but 404
        "closed": f"http://127.0.0.1:{free_port()}",  # nobody listens there
    }[where]
    library = checked_library(storage, tmp_path, books_repository.url)
    assert library.check_catalogue_fetchable()
    offline = checked_library(storage, tmp_path, url)
    assert offline.default_book() == REFERENCE_DEFAULT_BOOK  # the last answer, until checked
    assert not offline.check_catalogue_fetchable()
    assert offline.default_book() == DEFAULT_BOOK
    assert checked_library(storage, tmp_path, url).default_book() == DEFAULT_BOOK


def test_without_a_books_url_the_catalogue_is_taken_as_fetchable(
    storage: Storage, tmp_path: Path
) -> None:
    library = checked_library(storage, tmp_path, "")
    assert library.default_book() == REFERENCE_DEFAULT_BOOK
    assert library.check_catalogue_fetchable()
