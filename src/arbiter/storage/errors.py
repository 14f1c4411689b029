"""Storage failures that callers are expected to handle.

Each backend reports constraint violations its own way (sqlite3 messages,
PostgreSQL SQLSTATEs); the stores translate them into these, so the domain
reacts identically on SQLite and PostgreSQL.
"""


class StorageError(Exception):
    """Base of the storage errors meant to be caught."""


class DuplicateKey(StorageError):  # noqa: N818 - named for what happened
    """An insert collided with a unique key (e.g. a username already taken)."""

    def __init__(self, what: str, value: object) -> None:
        super().__init__(f"duplicate {what}: {value!r}")
        self.what = what
        self.value = value


class StorageUnavailable(StorageError):  # noqa: N818 - named for what happened
    """The database cannot be reached right now (down, restarting, locked past the
    busy timeout); nothing was written. Retrying later is the right reaction."""


class QueryTooLong(StorageError):  # noqa: N818 - named for what happened
    """A statement ran past its limit and the database stopped it: a
    time-limited read's (`Storage.read(time_limit=...)`) or any request's
    (storage/request_bounds.py); nothing was written."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"a query ran past {seconds:g} s and was stopped")
        self.seconds = seconds


class QueryAbandoned(StorageError):  # noqa: N818 - named for what happened
    """The request's client went away and its database work was stopped
    (storage/request_bounds.py); nothing was written."""


class DatabaseNotOpened(StorageError):  # noqa: N818 - named for what happened
    """The database the settings name cannot be used at all: a URL we do not
    support, a server that cannot be reached, a file that cannot be opened.
    Commands stop at start-up with its message, one line an operator can act on."""


class LeaseLost(StorageUnavailable):
    """A write of a primary that is no longer the primary: another one took the
    database over (storage/lease_fence.py); nothing was written. Its callers
    answer as when the database is away, so workers retry, and reach the
    new primary."""


class LeaseHeld(StorageError):  # noqa: N818 - named for what happened
    """Another primary holds this database's lease (storage/lease.py)."""
