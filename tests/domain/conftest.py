"""Fixtures for the domain services: real storage on each backend, a test clock,
and argon2 at its lowest cost. (`runs/conftest.py` brings its own storage and clock.)"""

from collections.abc import Iterator

import pytest

from arbiter.domain.accounts import Accounts
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine
from tests.domain.support import Clock, cheap_hasher


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def storage(database_url: str) -> Iterator[Storage]:
    engine = make_engine(database_url, pool_size=5)
    yield Storage(engine)
    engine.dispose()


@pytest.fixture
def accounts(storage: Storage, clock: Clock) -> Accounts:
    return Accounts(storage, hasher=cheap_hasher(), clock=clock)
