"""The official-stockfish/books catalogue: the books the official worker can fetch.

The official Fishtest worker downloads a run's book only from that repository
(`<name>.zip`) and checks it against `book_sri`, so a run on one of its books
can go to any worker, and a run on a book Arbiter hosts only to ours. The
catalogue is that repository's `books.json` (`{name: {total, white, black,
min_depth, max_depth, sri}}`): a copy ships with Arbiter, and an operator
replaces it with `arbiter books import-catalogue FILE`, which stores it in the
database so that every process reads the same one. Pure apart from reading
the shipped file.
"""

import json
import re
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from arbiter.domain.errors import ValidationError

KV_KEY = "book_catalogue"
# The book the reference's new-test form proposes; ours too while the catalogue has it.
REFERENCE_DEFAULT_BOOK = "UHO_Lichess_4852_v1.epd"
MAX_BOOKS = 10_000  # a catalogue is a few dozen books; this only bounds a bad file

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,100}\.(epd|pgn)$")
_SRI = re.compile(r"^[A-Za-z0-9+/]{64}$")  # base64 of 48 bytes, no padding needed
_COUNTS = ("total", "white", "black")
_DEPTHS = ("min_depth", "max_depth")  # null for some books of the repository


@dataclass(frozen=True, slots=True)
class CatalogueBook:
    name: str
    total: int
    white: int
    black: int
    min_depth: int | None
    max_depth: int | None
    sri: str

    def entry(self) -> dict[str, Any]:
        """The book as a `books.json` entry (without its name, the entry's key)."""
        fields = asdict(self)
        del fields["name"]
        return fields


Catalogue = dict[str, CatalogueBook]


def parse_catalogue(document: object) -> Catalogue:
    """A `books.json` document as books; ValidationError naming the first bad entry."""
    if not isinstance(document, dict):
        raise ValidationError("catalogue", "expected a JSON object of books by name")
    if len(document) > MAX_BOOKS:
        raise ValidationError("catalogue", f"more than {MAX_BOOKS} books")
    return {name: _parse_entry(name, entry) for name, entry in document.items()}


def _parse_entry(name: object, entry: object) -> CatalogueBook:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError("catalogue", f"{name!r}: not a book name (.epd or .pgn)")
    if not isinstance(entry, dict):
        raise ValidationError("catalogue", f"{name}: expected an object")
    numbers = {key: entry.get(key) for key in (*_COUNTS, *_DEPTHS)}
    for key, value in numbers.items():
        if value is None and key in _DEPTHS:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError("catalogue", f"{name}: {key} must be a whole number >= 0")
    sri = entry.get("sri")
    if not isinstance(sri, str) or not _SRI.match(sri):
        raise ValidationError("catalogue", f"{name}: sri must be the base64 of a SHA-384")
    return CatalogueBook(name=name, sri=sri, **numbers)  # type: ignore[arg-type]


def catalogue_document(catalogue: Catalogue) -> dict[str, dict[str, Any]]:
    """Back to `books.json` form (what the database stores)."""
    return {name: book.entry() for name, book in sorted(catalogue.items())}


def shipped_catalogue() -> Catalogue:
    """The copy of official-stockfish/books' books.json shipped with Arbiter."""
    text = (resources.files("arbiter") / "data" / "books" / "catalogue.json").read_text("utf-8")
    return parse_catalogue(json.loads(text))
