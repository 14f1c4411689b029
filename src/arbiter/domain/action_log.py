"""The event-log page's questions: which actions, found how, in which order, and
how many match.

A page asks with plain values (`LogQuery`): an action name, part of a user
name (any case: it matches the accounts whose names hold it), a run, words of
the comment, worker, run or user, and newest or oldest first. Paging is by
time in either direction, so a page deep in a log of millions of actions
costs what the first one does. Totals are counted by the database up to
COUNT_CAP and stated as "more than" beyond it.

Words are looked for in each candidate row (the same bounded search as
`/api/actions`: the caller holds one of `Actions.search_slot()`'s places, and
the read stops after SEARCH_SECONDS), so a search with words has no total.
Runs in the threadpool.
"""

from dataclasses import dataclass
from typing import Any

from arbiter.domain.actions import SEARCH_SECONDS, to_wire
from arbiter.domain.errors import BadRequest
from arbiter.storage import Storage, Tx
from arbiter.storage.action_search import (
    ActionSearch,
    AllOf,
    Check,
    Compare,
    Condition,
    OneOf,
    SearchTooLong,
)
from arbiter.storage.errors import QueryTooLong
from arbiter.storage.records import ActionRecord

ACTIONS_PER_PAGE = 100
COUNT_CAP = 10_000  # matching actions counted; beyond, "more than"
MATCHED_USERS = 20  # accounts a part of a name may stand for
MAX_WORDS = 100  # characters of the words searched


@dataclass(frozen=True, slots=True)
class LogQuery:
    action: str | None = None
    user: str | None = None  # part of a user name, any case
    run_id: str | None = None
    words: str | None = None  # in the comment, worker, run or user acted upon
    oldest_first: bool = False
    before: float | None = None  # newest first: actions older than this
    after: float | None = None  # oldest first: actions newer than this


@dataclass(frozen=True, slots=True)
class LogPage:
    entries: list[dict[str, Any]]
    more: bool  # another page follows in this order
    total: int | None  # matching actions up to COUNT_CAP; None when words were searched
    users: tuple[str, ...]  # the accounts `user` matched (empty when no user was asked)
    count_cap: int = COUNT_CAP

    @property
    def total_capped(self) -> bool:
        return self.total is not None and self.total > self.count_cap


def log_page(
    storage: Storage,
    query: LogQuery,
    *,
    per_page: int = ACTIONS_PER_PAGE,
    count_cap: int = COUNT_CAP,
    search_seconds: float = SEARCH_SECONDS,
) -> LogPage:
    """One page of the log. With words, the caller holds a search slot;
    BadRequest when they would read too long (narrow it by action, user or run)."""
    with storage.read(time_limit=search_seconds if query.words else None) as tx:
        users = _matched_users(tx, query.user)
        if users == ():
            return LogPage([], False, 0, users, count_cap)
        where = _condition(query, users)
        search = ActionSearch(
            where=AllOf((*where, *_position(query))),
            limit=per_page + 1,
            newest_first=not query.oldest_first,
            scan_seconds=search_seconds,
        )
        found = _searched(tx, search)
        total = None if query.words else tx.actions.count(ActionSearch(AllOf(where)), count_cap)
    entries = [to_wire(record) for record in found[:per_page]]
    return LogPage(entries, len(found) > per_page, total, users or (), count_cap)


def _matched_users(tx: Tx, part: str | None) -> tuple[str, ...] | None:
    """None: no user asked; else the accounts named so exactly, or holding it."""
    if not part:
        return None
    exact = tx.users.get_by_key(part)
    if exact is not None:
        return (exact.username,)
    return tuple(tx.users.names_containing(part, MATCHED_USERS))


def _condition(query: LogQuery, users: tuple[str, ...] | None) -> tuple[Condition, ...]:
    parts: list[Condition] = []
    if query.action:
        parts.append(OneOf("action", (query.action,)))
    if users is not None:
        parts.append(OneOf("username", users))
    if query.run_id:
        parts.append(OneOf("run_id", (query.run_id,)))
    if query.words:
        parts.append(Check(_holding(query.words)))
    return tuple(parts)


def _position(query: LogQuery) -> tuple[Condition, ...]:
    if query.oldest_first and query.after is not None:
        return (Compare("time", ">", query.after),)
    if not query.oldest_first and query.before is not None:
        return (Compare("time", "<", query.before),)
    return ()


def _holding(words: str) -> Any:
    """Whether every word is in the row's comment, worker, run or user, any case."""
    wanted = words.lower().split()

    def passes(record: ActionRecord) -> bool:
        text = " ".join(
            value
            for value in (record.message, record.worker, record.run, record.user, record.username)
            if value
        ).lower()
        return all(word in text for word in wanted)

    return passes


def _searched(tx: Tx, search: ActionSearch) -> list[ActionRecord]:
    try:
        return tx.actions.search(search)
    except (SearchTooLong, QueryTooLong):
        raise BadRequest(
            "The search read for too long: narrow it with an action, a user or a run."
        ) from None
