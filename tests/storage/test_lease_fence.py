"""Fencing on PostgreSQL: once another primary has marked the database as its
own, every write of the old one is refused before it writes anything; and a
new primary's mark waits for the old one's write in progress, so that write
is either in what the new primary loads or refused."""

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from arbiter.storage.errors import LeaseLost, StorageUnavailable
from arbiter.storage.lease_fence import MARKER_KEY, LeaseFence

HANG_GUARD = 30.0


@pytest.fixture
def engine(postgres_database_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_database_url, pool_size=4)
    yield engine
    engine.dispose()


def claimed(engine: Engine, token: str) -> Storage:
    """A primary's storage, as web/lease.py's claim leaves it."""
    storage = Storage(engine)
    with storage.write() as tx:
        tx.kv.set(MARKER_KEY, {"token": token, "since": 0.0, "beat": 0})
    storage.fence = LeaseFence(token)
    return storage


def test_a_primary_whose_database_another_claimed_writes_nothing(engine: Engine) -> None:
    old = claimed(engine, "old")
    with old.write() as tx:
        tx.kv.set("written", {"by": "old"})
    claimed(engine, "new")
    refused = pytest.raises(LeaseLost, match="another primary has taken this database over")
    with refused, old.write() as tx:
        tx.kv.set("written", {"by": "old, stale"})
    with old.read() as tx:
        assert tx.kv.get("written") == {"by": "old"}
    assert issubclass(LeaseLost, StorageUnavailable)  # answered as "retry shortly"


def test_a_new_mark_waits_for_the_write_in_progress(engine: Engine) -> None:
    old = claimed(engine, "old")
    writing, marked = threading.Event(), threading.Event()

    def claim_meanwhile() -> None:
        claimed(engine, "new")
        marked.set()

    with old.write() as tx:
        tx.kv.set("written", {"by": "old"})
        writing.set()
        claimer = threading.Thread(target=claim_meanwhile)
        claimer.start()
        assert not marked.wait(0.5)  # held by the old primary's share lock on the mark
    assert marked.wait(HANG_GUARD)  # ... until its write commits
    claimer.join(HANG_GUARD)
    with old.read() as tx:
        assert tx.kv.get("written") == {"by": "old"}  # landed before the new mark
    with pytest.raises(LeaseLost), old.write() as tx:
        tx.kv.set("written", {"by": "old, stale"})
