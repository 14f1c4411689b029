"""`book_sri`: the hash the official worker computes, over the book's text."""

import base64
import hashlib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from arbiter.protocol.books import BookHasher, book_sri

SHIPPED = Path(__file__).parents[2] / "src" / "arbiter" / "data" / "books"


def official_worker_sri(path: Path) -> str:
    """What Fishtest's worker does: read in text mode, hash the UTF-8 of the text."""
    return base64.b64encode(hashlib.sha384(path.read_text().encode("utf8")).digest()).decode()


def test_bare_base64_of_sha384_without_prefix() -> None:
    assert book_sri(b"abc\n") == base64.b64encode(hashlib.sha384(b"abc\n").digest()).decode()
    assert not book_sri(b"").startswith("sha384-")
    assert len(book_sri(b"x")) == 64


def test_line_endings_are_translated_as_in_text_mode(tmp_path: Path) -> None:
    for raw in (b"a\r\nb\r\n", b"a\rb\r", b"a\nb\n", b"a\r\r\nb\n\r", b"\r"):
        path = tmp_path / "book.epd"
        path.write_bytes(raw)
        assert book_sri(raw) == official_worker_sri(path), raw


def test_the_shipped_book_has_the_official_workers_sri() -> None:
    book = SHIPPED / "arbiter-openings-v1.epd"
    assert book_sri(book.read_bytes()) == official_worker_sri(book)


@given(
    st.lists(st.sampled_from([b"a", b"\r", b"\n", b"\r\n", b"xyz "]), max_size=40),
    st.lists(st.integers(min_value=0, max_value=60), max_size=6),
)
def test_chunk_boundaries_do_not_change_the_hash(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    hasher = BookHasher()
    start = 0
    for cut in sorted(min(c, len(data)) for c in cuts):
        hasher.update(data[start:cut])
        start = cut
    hasher.update(data[start:])
    assert hasher.sri() == book_sri(data)
