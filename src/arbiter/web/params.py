"""Whole numbers from paths and query strings: ASCII digits only.

`str.isdigit` also accepts superscripts and other Unicode digits that `int`
then refuses (an unhandled error), and a long digit string makes `int` slow or
refuse too; no task id or page number needs more than MAX_DIGITS digits.
"""

MAX_DIGITS = 9
MAX_PAGE = 10**6  # pages of a listing, far beyond any real one


def whole_number(text: str) -> int | None:
    """The number `text` spells in 1 to MAX_DIGITS ASCII digits, else None."""
    if 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None


def page_number(text: str) -> int:
    """A listing's page from the query string; 1 unless it names a page."""
    page = whole_number(text)
    return page if page is not None and 0 < page < MAX_PAGE else 1
