"""Fixtures for the runs domain: a real database, a real git repository, a
controllable clock, and users."""

import subprocess
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine

from arbiter.domain.accounts import User
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from tests.domain.runs.support import Clock, make_user


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def repo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local repository with `master` and `patch` branches (file:// URL)."""
    repo = tmp_path_factory.mktemp("engine-repo")
    _git(repo, "init", "-q", "-b", "master")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "patch")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "patch")
    return f"file://{repo}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def storage(engine: Engine) -> Storage:
    return Storage(engine)


@pytest.fixture
def runs(storage: Storage, clock: Clock) -> Runs:
    return Runs(storage, task_gate=threading.Semaphore(5), clock=clock)


@pytest.fixture
def alice(storage: Storage) -> User:
    return make_user(storage, "alice")


@pytest.fixture
def root(storage: Storage) -> User:
    return make_user(storage, "root", approver=True)
