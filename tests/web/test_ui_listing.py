"""Sorting, filtering and paging of in-memory tables (web/ui/listing.py)."""

from arbiter.web.ui.listing import list_rows, parse_query

ROWS = [("alice", 5), ("bob", 9), ("Carol", 1), ("dave", 9), ("eve", 3)]
KEYS = {"name": lambda row: row[0].lower(), "games": lambda row: row[1]}


def listed(params: dict[str, str], page_size: int = 2) -> tuple[list[str], int, int, int]:
    query = parse_query(params, list(KEYS), "games", descending=True)
    found = list_rows(
        ROWS,
        query,
        keys=KEYS,
        text_of=lambda row: row[0],
        page_size=page_size,
        is_focus=lambda row, name: row[0].casefold() == name.casefold(),
    )
    return [row[0] for row in found.rows], found.page, found.pages, found.total


def test_default_order_keeps_ties_in_place_and_pages() -> None:
    assert listed({}) == (["bob", "dave"], 1, 3, 5)
    assert listed({"page": "3"}) == (["Carol"], 3, 3, 5)
    assert listed({"page": "9"}) == (["Carol"], 3, 3, 5)  # past the end: the last page


def test_sort_by_a_column_either_way_and_unknown_columns_ignored() -> None:
    assert listed({"sort": "name", "order": "asc"}, 5)[0] == [
        "alice",
        "bob",
        "Carol",
        "dave",
        "eve",
    ]
    assert listed({"sort": "name", "order": "desc"}, 5)[0][0] == "eve"
    assert listed({"sort": "nonsense"}) == listed({})


def test_filter_in_any_case_and_focus_opens_the_page_of_a_row() -> None:
    assert listed({"q": "A"}, 5)[0] == ["dave", "alice", "Carol"]
    assert listed({"user": "CAROL"})[:2] == (["Carol"], 3)
    assert listed({"user": "nobody", "page": "2"})[1] == 2


def test_links_keep_the_query_and_leave_defaults_out() -> None:
    query = parse_query(
        {"sort": "name", "order": "asc", "q": "a b"}, list(KEYS), "games", descending=True
    )
    assert query.link(page=2) == "sort=name&order=asc&q=a+b&page=2"
    assert query.link(page=1) == "sort=name&order=asc&q=a+b"
