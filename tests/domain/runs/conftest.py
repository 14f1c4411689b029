"""Fixtures for the runs domain: a real database, a real git repository, a
controllable clock, and users."""

import threading
from collections.abc import Callable

import pytest
from sqlalchemy import Engine

from arbiter.domain.accounts import User
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from tests.domain.runs.support import Clock, make_user


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def storage(engine: Engine) -> Storage:
    return Storage(engine)


@pytest.fixture
def runs(storage: Storage, clock: Clock, new_runs: Callable[..., Runs]) -> Runs:
    return new_runs(storage, task_gate=threading.Semaphore(5), clock=clock)


@pytest.fixture
def alice(storage: Storage) -> User:
    return make_user(storage, "alice")


@pytest.fixture
def root(storage: Storage) -> User:
    return make_user(storage, "root", approver=True)
