"""Fixtures for the web layer: a real app (real SQLite file) in-process through
Starlette's TestClient, which runs the lifespan like uvicorn does."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from arbiter.runtime.settings import Settings
from arbiter.web.app import create_app
from tests.web.api_support import api_with_users


@pytest.fixture
def settings(tmp_path: Path, sqlite_database_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database_url=sqlite_database_url,
        secret_key="test-secret",
        # cheap hashing keeps the suite fast; production uses OWASP's minimum
        argon2_time_cost=1,
        argon2_memory_kib=8,
        git_allow="file",  # test repositories are file:// URLs
        overload_lag_ms=0,  # the loop shares the test process: see api_settings
        books_url="",  # no check of the books repository: the catalogue's default book
        signup_proof_of_work=1000,  # real proofs, solved fast by the tests
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), base_url="http://testserver") as test_client:
        yield test_client


@pytest.fixture
def lite(
    tmp_path: Path, sqlite_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    """The worker API with alice and root, on SQLite only: for behaviour decided
    before storage is read (refusals, overload)."""
    with api_with_users(tmp_path, sqlite_database_url, monkeypatch) as client:
        yield client
