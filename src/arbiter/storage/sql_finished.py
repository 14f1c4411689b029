"""The finished lists on SQL: filters, keyset pages and bounded counts.

A page is read by keyset, never by OFFSET: its cursor is the last row's sort
key, and the next page starts below it through the same index, so page 2,000
costs what page 1 does. The plain lists sort by (last_updated, id), newest
first; a text search sorts by the text index's own order (newest submission
first), which it can read in order whatever the word (storage/run_search.py).
Counts stop at a bound: an exact count of a quarter of a million rows is a
scan on every request.
"""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Row,
    Select,
    and_,
    func,
    or_,
    select,
)

from arbiter.storage import run_search
from arbiter.storage.base import FinishedRunFilter
from arbiter.storage.schema import contributor_totals, run_words, runs

LTC_TC_BASE = 40.0  # seconds: a run is "long time control" from 40 s per game on
_RUN_ID_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class Listing:
    """A finished list's query before paging, and how its rows are ordered."""

    query: Select[Any]
    keys: tuple[ColumnElement[Any], ...]  # sort key, newest first when descending
    searching: bool

    def cursor(self, row: Row[Any]) -> str:
        if self.searching:
            return f"s{row._mapping['cursor_seq']}"
        return f"{row.last_updated!r}_{row.id}"

    def parse(self, cursor: str) -> tuple[Any, ...]:
        """The sort key a cursor of this list holds; ValueError for any other text."""
        if self.searching:
            seq = cursor[1:]
            if not cursor.startswith("s") or not (seq.isascii() and seq.isdigit()):
                raise ValueError(f"not a search cursor: {cursor!r}")
            return (int(seq),)
        when, _, run_id = cursor.partition("_")
        if not run_id or len(run_id) > 24 or not set(run_id) <= _RUN_ID_CHARS:
            raise ValueError(f"not a list cursor: {cursor!r}")
        try:
            return float(when), run_id
        except ValueError:
            raise ValueError(f"not a list cursor: {cursor!r}") from None


def listing(connection: Connection, run_filter: FinishedRunFilter) -> Listing:
    search = run_search.matches(connection, run_filter.text) if run_filter.text else None
    owners = owners_like(connection, run_filter.user_contains)
    if search is None:
        query = _where(select(runs), run_filter, owners)
        return Listing(query, (runs.c.last_updated, runs.c.id), searching=False)
    source, condition, key = search
    joined = source.join(runs, runs.c.id == run_words.c.run_id)
    query = select(runs, key.label("cursor_seq")).select_from(joined).where(condition)
    return Listing(_where(query, run_filter, owners), (key,), searching=True)


def ordered(listing: Listing, *, newest_first: bool = True) -> Select[Any]:
    keys = [key.desc() if newest_first else key.asc() for key in listing.keys]
    return listing.query.order_by(*keys)


def beyond(listing: Listing, cursor: str, *, older: bool) -> Select[Any]:
    """The listing's rows older (or newer) than the row `cursor` was made from,
    written so that an index on the sort key serves it on both backends."""
    values = listing.parse(cursor)
    if len(listing.keys) == 1:
        (key,), (value,) = listing.keys, values
        return listing.query.where(key < value if older else key > value)
    (first, second), (first_value, second_value) = listing.keys, values
    if older:
        condition = and_(first <= first_value, or_(first < first_value, second < second_value))
    else:
        condition = and_(first >= first_value, or_(first > first_value, second > second_value))
    return listing.query.where(condition)


def _where(
    query: Select[Any], run_filter: FinishedRunFilter, owners: list[str] | None
) -> Select[Any]:
    query = query.where(runs.c.finished.is_(True), runs.c.deleted.is_(False))
    if run_filter.username is not None:
        query = query.where(runs.c.username == run_filter.username)
    if run_filter.failed_only:
        query = query.where(runs.c.failed.is_(True))
    if run_filter.success_only:
        query = query.where(runs.c.is_green.is_(True))
    if run_filter.yellow_only:
        query = query.where(runs.c.is_yellow.is_(True))
    if run_filter.ltc_only:
        query = query.where(runs.c.tc_base >= LTC_TC_BASE)
    if run_filter.since is not None:
        query = query.where(runs.c.last_updated >= run_filter.since)
    if owners is not None:
        query = query.where(runs.c.username.in_(owners))
    return query


def owners_like(connection: Connection, part: str) -> list[str] | None:
    """The owners a user filter means (None: no filter): the one whose name is
    `part` in any case if there is one, else everyone whose name holds it, among
    the names of the contributor totals (everyone who ever submitted a run).
    Then the runs are read by owner, through the owner's index."""
    if not part:
        return None
    name = contributor_totals.c.username
    query = select(name).where(func.lower(name).contains(part.lower(), autoescape=True))
    found = list(connection.execute(query).scalars())
    exact = [owner for owner in found if owner.casefold() == part.casefold()]
    return exact or found
