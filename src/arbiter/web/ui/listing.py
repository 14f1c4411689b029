"""Sorting, filtering and paging a table held in memory (machines, contributors):
pure functions of the rows and the query string, run in the threadpool."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from arbiter.web.params import page_number

Row = TypeVar("Row")
MAX_FILTER_CHARS = 100


@dataclass(frozen=True, slots=True)
class ListQuery:
    sort: str
    descending: bool
    text: str = ""  # rows whose text contains it, any case
    page: int = 1
    focus: str = ""  # a row to show: its page, highlighted

    def link(self, **changes: Any) -> str:
        """This query's string with `changes` (defaults left out)."""
        values = {
            "sort": self.sort,
            "order": "desc" if self.descending else "asc",
            "q": self.text,
            "page": self.page,
            **changes,
        }
        return urlencode({k: v for k, v in values.items() if v not in ("", None, 1)})


@dataclass(frozen=True, slots=True)
class Listed(Generic[Row]):
    rows: list[Row]
    total: int  # rows that pass the filter
    page: int
    pages: int
    start: int  # rank of the first row shown, from 0
    query: ListQuery
    focused: Row | None = None


def parse_query(
    params: Mapping[str, str], sorts: Sequence[str], default: str, *, descending: bool
) -> ListQuery:
    sort = params.get("sort", default)
    order = params.get("order", "")
    return ListQuery(
        sort=sort if sort in sorts else default,
        descending=descending if order not in ("asc", "desc") else order == "desc",
        text=" ".join(params.get("q", "").split())[:MAX_FILTER_CHARS],
        page=page_number(params.get("page", "1")),
        focus=params.get("user", "").strip()[:64],
    )


def list_rows(
    rows: Sequence[Row],
    query: ListQuery,
    *,
    keys: Mapping[str, Callable[[Row], Any]],
    text_of: Callable[[Row], str],
    page_size: int,
    is_focus: Callable[[Row, str], bool] | None = None,
) -> Listed[Row]:
    """The page of `rows` the query asks for: filtered by its text, sorted by its
    key (ties keep their order), and the page that holds the focused row, if any."""
    needle = query.text.casefold()
    kept = [row for row in rows if needle in text_of(row).casefold()] if needle else list(rows)
    kept.sort(key=keys[query.sort], reverse=query.descending)
    pages = max(1, -(-len(kept) // page_size))
    page = query.page
    focused = None
    if query.focus and is_focus is not None:
        index = next((i for i, row in enumerate(kept) if is_focus(row, query.focus)), None)
        if index is not None:
            page, focused = index // page_size + 1, kept[index]
    page = min(max(page, 1), pages)
    start = (page - 1) * page_size
    return Listed(kept[start : start + page_size], len(kept), page, pages, start, query, focused)
