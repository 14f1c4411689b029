"""Bounds on the database work done for a request.

Every transaction opened for a request is bounded by the database itself: a
statement that runs past the engine's request bound is stopped (PostgreSQL's
`statement_timeout`, which the pool gives a connection handed out for a
request; SQLite's progress handler, for the transaction), and when the
request is abandoned (its client went away) its reads stop too: the SQLite
handler reads a flag, and PostgreSQL is sent a cancel request for the
statement running. Its writes are left to end within the bound: short, and
a handler cut between two writes by its client leaving could leave half of
what it meant to do. Background jobs and the commands run outside any
request and are not bounded.

Which work is for a request is told by a context variable: the web layer sets
it around each request, and contexts follow calls into the threadpool; a
thread that writes for many requests at once (a batch of worker calls) sets
one of its own, which nobody abandons.
"""

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from arbiter.storage.errors import QueryAbandoned

if TYPE_CHECKING:  # psycopg is imported only where PostgreSQL is used
    import psycopg

log = logging.getLogger(__name__)

CANCEL_TIMEOUT_SECONDS = 5.0  # a cancel request that gets no answer is given up
ABANDONED = "the request was abandoned (its client went away); its queries were stopped"


class RequestQueries:
    """The database work of one request (or of one thread serving requests)."""

    __slots__ = ("_lock", "_running", "abandoned")

    def __init__(self) -> None:
        self.abandoned = False
        self._lock = threading.Lock()
        # Driver connections inside one of its transactions now. A connection
        # leaves under the lock before its transaction ends, so a cancel sent
        # under the lock always reaches this request's statement, never the
        # next user's of that pooled connection.
        self._running: list[Any] = []

    def abandon(self) -> None:
        """Stop this request's reads: none starts any more, and those running
        are stopped. Any thread (the event loop calls it when a client goes
        away); returns at once."""
        if self.abandoned:
            return
        self.abandoned = True
        if any(_is_postgresql(connection) for connection in self._running):
            # A cancel request opens a connection of its own: not on the loop.
            canceller = threading.Thread(target=self._cancel_running, name="arbiter-cancel")
            canceller.daemon = True
            canceller.start()

    def running(self) -> int:
        """How many of its reads are open now."""
        return len(self._running)

    @contextmanager
    def transaction_of(self, driver_connection: Any) -> Iterator[None]:
        """Count the read on `driver_connection` as this request's while the
        block runs: abandoning the request stops it. [THREAD]"""
        with self._lock:
            self._running.append(driver_connection)
        try:
            # Checked after joining: either `abandon` saw this connection and
            # cancels its statement, or this sees the flag.
            if self.abandoned:
                raise QueryAbandoned(ABANDONED)
            yield
        finally:
            with self._lock:
                self._running.remove(driver_connection)

    def _cancel_running(self) -> None:
        with self._lock:
            for connection in self._running:
                if _is_postgresql(connection):
                    _cancel(connection)


def _is_postgresql(driver_connection: Any) -> bool:
    """The two backends' driver connections told apart without importing
    psycopg, which costs a SQLite instance 0.2 s at start."""
    return not isinstance(driver_connection, sqlite3.Connection)


def _cancel(connection: "psycopg.Connection[Any]") -> None:
    import psycopg

    try:
        connection.cancel_safe(timeout=CANCEL_TIMEOUT_SECONDS)
    except (psycopg.Error, OSError) as error:  # the statement ends at its bound anyway
        log.debug("cancel request not delivered: %s", error)


_current: ContextVar[RequestQueries | None] = ContextVar("arbiter_request_queries", default=None)


def current() -> RequestQueries | None:
    """The request whose work this context does, None outside any request."""
    return _current.get()


@contextmanager
def serving(queries: RequestQueries) -> Iterator[RequestQueries]:
    """Transactions opened in this context (and in the threadpool calls made
    from it) are bounded, and belong to `queries`."""
    token = _current.set(queries)
    try:
        yield queries
    finally:
        _current.reset(token)
