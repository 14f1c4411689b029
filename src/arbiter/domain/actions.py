"""The audit log: every state change a person or worker caused, as the reference's
`actions` collection (same action names and wire shape).

`Actions.record` is called inside the caller's write transaction, so an action
is committed together with the change it describes, or not at all.
Runs in the threadpool (blocking database I/O).
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from arbiter.domain.action_query import parse_search
from arbiter.domain.errors import BadRequest, SearchesBusy
from arbiter.domain.search_time import SearchTime
from arbiter.storage import Storage, Tx
from arbiter.storage.action_search import SearchTooLong
from arbiter.storage.base import ActionFilter, NewAction
from arbiter.storage.errors import QueryTooLong
from arbiter.storage.records import ActionRecord

MAX_MESSAGE = 5120  # characters, as the reference truncates worker and user messages
SYSTEM_USER = "arbiter.system"

ACTION_NAMES = frozenset(
    {
        "failed_task",
        "crash_or_time",
        "dead_task",
        "system_event",
        "new_run",
        "upload_nn",
        "upload_book",
        "modify_run",
        "delete_run",
        "stop_run",
        "finished_run",
        "approve_run",
        "purge_run",
        "block_user",
        "accept_user",
        "reject_user",
        "block_worker",
        "quarantine_worker",
        "log_message",
        "worker_log",
    }
)


# Actions that are webhook events, by event name.
RUN_EVENTS = {"approve_run": "approved", "finished_run": "finished", "stop_run": "stopped"}


def record(tx: Tx, entry: NewAction) -> int:
    """Append one action in the open transaction `tx` (its message cut to
    MAX_MESSAGE); returns its id."""
    if entry.action not in ACTION_NAMES:
        raise ValueError(f"unknown action {entry.action!r}")
    action_id = tx.actions.add(replace(entry, message=entry.message[:MAX_MESSAGE]))
    event, run_id = RUN_EVENTS.get(entry.action), entry.run_id
    if event is not None and run_id is not None:
        # The webhooks' outbox, in the same transaction: an event is never lost
        # nor sent for a change that was rolled back (domain/webhooks.py).
        tx.run_events.add(time=entry.time, event=event, run_id=run_id, action_id=action_id)
    return action_id


# Keys the reference gives some actions at top level, which we keep in `data`
# (an uploaded net's name, `nn`, in upload_nn).
LIFTED_DATA_KEYS = ("nn",)


def wire_id(action: ActionRecord) -> str:
    """The action's id as 24 hex digits, the form of the reference's ObjectIds
    (clients parse them): the time in seconds, then our row id; an action
    imported from Fishtest keeps its ObjectId."""
    if action.fishtest_id is not None:
        return action.fishtest_id
    return f"{max(0, int(action.time)):08x}{action.id:016x}"


def to_wire(action: ActionRecord) -> dict[str, Any]:
    """The reference's shape: `_id` as 24 hex digits, absent fields left out; a
    message is always there, as almost every action of the reference has one."""
    wire: dict[str, Any] = {
        "_id": wire_id(action),
        "time": action.time,
        "action": action.action,
        "username": action.username,
        "message": action.message,
    }
    optional = {
        "run_id": action.run_id,
        "run": action.run,
        "task_id": action.task_id,
        "worker": action.worker,
        "user": action.user,
        "data": action.data,
    }
    wire.update({key: value for key, value in optional.items() if value is not None})
    if isinstance(action.data, dict):
        wire.update({key: action.data[key] for key in LIFTED_DATA_KEYS if key in action.data})
    return wire


SEARCH_SECONDS = 2.0  # an event-log search's time, its SQL and its checks alike
# Event-log searches running together. One: on PostgreSQL a search is a
# backend busy on a core of the database's machine, and a second one beside
# it doubled the honest p99 of a flood on two cores (bench/flood.py).
SEARCHES_AT_ONCE = 1


class Actions:
    """Reading the log. Writing goes through `record`, inside other operations."""

    def __init__(self, storage: Storage, searches_at_once: int = SEARCHES_AT_ONCE) -> None:
        self._storage = storage
        self._search_slots = threading.BoundedSemaphore(searches_at_once)
        self._search_time = SearchTime()

    @contextmanager
    def search_slot(self) -> Iterator[None]:
        """One of the SEARCHES_AT_ONCE places for a search, or SearchesBusy at
        once: when all are taken, or searches have spent their share of CPU
        time (`search_time.py`; the refusal says when to come back). Never
        blocks: the web handler takes it on the event loop before it reads the
        query, so a refusal costs no body, parse or thread."""
        wait = self._search_time.wait()
        if wait > 0:
            raise SearchesBusy(wait)
        if not self._search_slots.acquire(blocking=False):
            raise SearchesBusy()
        started = time.monotonic()
        try:
            yield
        finally:
            self._search_time.spend(time.monotonic() - started)
            self._search_slots.release()

    def search(self, query: object) -> list[dict[str, Any]]:
        """The actions a MongoDB-style query matches (`action_query`), oldest first.
        The caller holds a `search_slot()`.

        Anyone may send one, and a query can be made to read most of the log:
        each runs for SEARCH_SECONDS at most, and SEARCHES_AT_ONCE run at a time,
        so searches never take the connections the pages and workers need; and
        each spends at most half of its time working (storage's `time_limit`
        reads yield as much as they run), so the CPU they share with the pages
        and workers is never theirs alone."""
        search = parse_search(query, wire_id)
        try:
            with self._storage.read(time_limit=SEARCH_SECONDS) as tx:
                return [to_wire(action) for action in tx.actions.search(search)]
        except (SearchTooLong, QueryTooLong) as error:
            raise BadRequest(
                f"{error}; narrow the query with time, action, username or run_id"
            ) from None

    def list(self, action_filter: ActionFilter) -> list[dict[str, Any]]:
        with self._storage.read() as tx:
            return [to_wire(action) for action in tx.actions.query(action_filter)]
