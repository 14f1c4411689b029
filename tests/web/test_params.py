"""Whole numbers from paths and query strings."""

import pytest

from arbiter.web.params import MAX_PAGE, page_number, whole_number


@pytest.mark.parametrize(
    ("text", "number"), [("0", 0), ("7", 7), ("000123", 123), ("9" * 9, 10**9 - 1)]
)
def test_ascii_digits_are_a_whole_number(text: str, number: int) -> None:
    assert whole_number(text) == number


@pytest.mark.parametrize("text", ["", "-1", "+1", "1.0", " 1", "\u00b9", "\u0663", "9" * 10, "x"])
def test_anything_else_is_none(text: str) -> None:
    """Superscripts and other scripts' digits pass str.isdigit; int() refuses some."""
    assert whole_number(text) is None


@pytest.mark.parametrize(
    ("text", "page"), [("3", 3), ("0", 1), ("", 1), ("\u00b9", 1), (str(MAX_PAGE), 1)]
)
def test_a_page_is_one_unless_the_text_names_a_page(text: str, page: int) -> None:
    assert page_number(text) == page
