"""The official-stockfish/books catalogue: parsing, the shipped copy, imports, and
how the library answers the scheduler and submissions with it."""

import json
from pathlib import Path
from typing import Any

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.files.book_catalogue import (
    KV_KEY,
    REFERENCE_DEFAULT_BOOK,
    catalogue_document,
    parse_catalogue,
    shipped_catalogue,
)
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.run_args import DEFAULT_BOOK
from arbiter.protocol.books import book_sri
from arbiter.storage import Storage
from tests.domain.files.support import stage
from tests.domain.support import Clock

UHO_SRI = "QHAU1P3LurcJr7UTRI7HZCVFsoYBWC3OTsBqZY/FfQA6VQo3MmECWtByB4gVACW5"
EPD = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"


def entry(sri: str, total: int = 1) -> dict[str, Any]:
    return {"total": total, "white": total, "black": 0, "min_depth": 2, "max_depth": 2, "sri": sri}


@pytest.fixture
def library(storage: Storage, clock: Clock, tmp_path: Path) -> BookLibrary:
    books = BookLibrary(storage, tmp_path / "books", clock)
    books.load()
    return books


def test_the_shipped_catalogue_is_official_stockfish_books() -> None:
    catalogue = shipped_catalogue()
    assert len(catalogue) >= 30
    uho = catalogue[REFERENCE_DEFAULT_BOOK]
    assert (uho.total, uho.sri) == (2632036, UHO_SRI)
    assert "8moves_v3.pgn" in catalogue


def test_depths_may_be_null_as_in_the_repository() -> None:
    book = parse_catalogue({"a.epd": {**entry(UHO_SRI), "min_depth": None, "max_depth": None}})
    assert book["a.epd"].min_depth is None


def test_a_catalogue_round_trips_through_its_document() -> None:
    catalogue = shipped_catalogue()
    assert parse_catalogue(json.loads(json.dumps(catalogue_document(catalogue)))) == catalogue


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "JSON object"),
        ({"x.txt": entry(UHO_SRI)}, "not a book name"),
        ({"../a.epd": entry(UHO_SRI)}, "not a book name"),
        ({"a.epd": 3}, "expected an object"),
        ({"a.epd": {**entry(UHO_SRI), "total": -1}}, "total"),
        ({"a.epd": {**entry(UHO_SRI), "white": True}}, "white"),
        ({"a.epd": {**entry(UHO_SRI), "sri": "sha384-" + UHO_SRI}}, "sri"),
        ({"a.epd": {k: v for k, v in entry(UHO_SRI).items() if k != "black"}}, "black"),
        ({"a.epd": {**entry(UHO_SRI), "max_depth": "8"}}, "max_depth"),
    ],
)
def test_bad_catalogues_name_the_entry(document: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_catalogue(document)


def test_catalogue_and_hosted_books_are_known_with_their_sri(
    library: BookLibrary, tmp_path: Path
) -> None:
    library.add("alice", "mine.epd", stage(tmp_path, EPD))
    assert library.known(REFERENCE_DEFAULT_BOOK)
    assert library.in_catalogue(REFERENCE_DEFAULT_BOOK)
    assert not library.is_hosted(REFERENCE_DEFAULT_BOOK)
    assert library.sri(REFERENCE_DEFAULT_BOOK) == UHO_SRI
    assert library.known("mine.epd")
    assert not library.in_catalogue("mine.epd")
    assert library.sri("mine.epd") == book_sri(EPD)
    assert not library.known("nope.epd")


def test_the_default_book_is_the_references_while_the_catalogue_has_it(
    library: BookLibrary,
) -> None:
    assert library.default_book() == REFERENCE_DEFAULT_BOOK
    library.import_catalogue({"other.epd": entry(UHO_SRI)}, "op")
    assert library.default_book() == DEFAULT_BOOK


def test_an_import_replaces_the_catalogue_for_every_process(
    library: BookLibrary, storage: Storage, clock: Clock, tmp_path: Path
) -> None:
    other = BookLibrary(storage, library.directory, clock)
    other.load()
    version = other.catalogue_version()
    assert library.import_catalogue({"new.epd": entry(book_sri(EPD), 7)}, "op") == 1
    assert [book.name for book in library.catalogue()] == ["new.epd"]
    assert other.in_catalogue(REFERENCE_DEFAULT_BOOK)  # until it reloads
    assert other.reload_catalogue() == 1
    assert other.in_catalogue("new.epd")
    assert not other.in_catalogue(REFERENCE_DEFAULT_BOOK)
    assert other.catalogue_version() > version
    assert other.reload_catalogue() == 1
    assert other.catalogue_version() == version + 1  # unchanged: nothing to redo
    with storage.read() as tx:
        assert list(tx.kv.get(KV_KEY)) == ["new.epd"]


def test_a_bad_import_changes_nothing(library: BookLibrary) -> None:
    before = library.catalogue()
    with pytest.raises(ValidationError):
        library.import_catalogue({"a.epd": {"sri": "x"}}, "op")
    assert library.catalogue() == before
    library.reload_catalogue()
    assert library.catalogue() == before


def test_a_hosted_copy_of_a_catalogue_book_must_be_that_book(
    library: BookLibrary, tmp_path: Path
) -> None:
    library.import_catalogue({"c.epd": entry(book_sri(EPD))}, "op")
    with pytest.raises(ValidationError, match="catalogue book"):
        library.add("alice", "c.epd", stage(tmp_path, EPD + EPD))
    assert not library.is_hosted("c.epd")
    library.add("alice", "c.epd", stage(tmp_path, EPD.replace(b"\n", b"\r\n")))
    assert library.is_hosted("c.epd")
    assert library.sri("c.epd") == book_sri(EPD)
