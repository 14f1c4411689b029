"""One fetch of a repository at a time across processes sharing a PostgreSQL database.

Processes on one machine share the mirror cache and lock it with `flock`
(`domain/repos/cache.py`); processes on several machines sharing one
PostgreSQL database each have their own cache, but should still not fetch the
same repository from its host at once. `AdvisoryRepoLocks.hold(key)` takes a
session-level advisory lock on a connection of its own (outside the pool, so a
slow fetch never holds a pooled connection), waiting at most `timeout` seconds
(`lock_timeout`). SQLite has one machine: `NoRepoLocks`.

Blocking: git threads only.
"""

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Protocol

from sqlalchemy.engine import URL

from arbiter.storage.engine import supported_url
from arbiter.storage.libpq import libpq_conninfo

# The advisory lock's first key ("GITR"), the second a hash of the repository:
# the primary's lease uses a one-key lock, so the two never meet.
NAMESPACE = 0x47495452
_CONNECT_TIMEOUT_SECONDS = 10


class RepoLockTimeout(Exception):  # noqa: N818
    """Another process held the repository's lock for longer than we may wait."""


class RepoLocks(Protocol):
    def hold(self, key: str, timeout: float) -> contextlib.AbstractContextManager[None]: ...


class NoRepoLocks:
    @contextlib.contextmanager
    def hold(self, key: str, timeout: float) -> Iterator[None]:
        yield


class AdvisoryRepoLocks:
    def __init__(self, url: URL) -> None:
        self._conninfo = libpq_conninfo(url)

    @contextlib.contextmanager
    def hold(self, key: str, timeout: float) -> Iterator[None]:
        import psycopg  # here: a SQLite instance never needs it (0.2 s of a start)

        digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big", signed=True)
        with psycopg.connect(
            self._conninfo, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_SECONDS
        ) as connection:
            connection.execute(f"SET lock_timeout = {max(1, int(timeout * 1000))}")
            try:
                connection.execute("SELECT pg_advisory_lock(%s, %s)", (NAMESPACE, digest))
            except psycopg.errors.LockNotAvailable:
                raise RepoLockTimeout(key) from None
            try:
                yield
            finally:
                with contextlib.suppress(psycopg.Error):  # closing the session frees it anyway
                    connection.execute("SELECT pg_advisory_unlock(%s, %s)", (NAMESPACE, digest))


def repo_locks(database_url: str) -> RepoLocks:
    url = supported_url(database_url)
    if url.get_backend_name() == "postgresql":
        return AdvisoryRepoLocks(url)
    return NoRepoLocks()
