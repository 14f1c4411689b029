"""Fixtures for the storage contract suite: `Storage` on a fresh database of each backend."""

from collections.abc import Iterator

import pytest

from arbiter.storage import Storage
from arbiter.storage.engine import make_engine


@pytest.fixture
def storage(database_url: str) -> Iterator[Storage]:
    engine = make_engine(database_url, pool_size=5)
    yield Storage(engine)
    engine.dispose()
