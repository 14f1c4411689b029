"""Shared fixtures: a fresh, migrated database on each storage backend.

`database_url` is parametrized over SQLite and PostgreSQL, so every test that
uses it (directly or through `engine`) runs on both backends: this is the
contract suite. PostgreSQL comes from the throwaway cluster that
`scripts/test` starts (ARBITER_TEST_POSTGRES_URL); without it those cases are
skipped, unless ARBITER_TEST_REQUIRE_POSTGRES=1 (set by the test command), in
which case they fail.
"""

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine, normalize_url, sqlite_url
from arbiter.storage.migrate import upgrade

BACKENDS = ("sqlite", "postgresql")

# `s3_server` and `s3_bucket`: a local S3-compatible server for the object-store tests.
pytest_plugins = ["tests.s3_server"]


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ARBITER_* setting of the developer's shell leaks into a test."""
    for name in list(os.environ):
        if name.startswith("ARBITER_") and not name.startswith("ARBITER_TEST_"):
            monkeypatch.delenv(name)


def postgres_admin_url() -> str | None:
    url = os.environ.get("ARBITER_TEST_POSTGRES_URL")
    if url:
        return url
    if os.environ.get("ARBITER_TEST_REQUIRE_POSTGRES") == "1":
        pytest.fail("ARBITER_TEST_REQUIRE_POSTGRES=1 but ARBITER_TEST_POSTGRES_URL is not set")
    return None


def _libpq(url: str) -> str:
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(False)


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A directory every test process of this run shares: xdist gives each of its
    workers a base directory of its own, under one parent made for the run."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if worker_id != "master" else base


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test (faster than migrating each time)."""
    directory = tmp_path_factory.mktemp("sqlite-template")
    engine = make_engine(sqlite_url(directory))
    upgrade(engine)
    engine.dispose()
    return directory / "arbiter.sqlite3"


@pytest.fixture(scope="session")
def postgres_template(worker_id: str) -> Iterator[str | None]:
    """A migrated PostgreSQL database per xdist worker, cloned for each test."""
    admin = postgres_admin_url()
    if admin is None:
        yield None
        return
    name = f"arbiter_template_{worker_id}"
    with psycopg.connect(_libpq(admin), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    engine = make_engine(str(make_url(normalize_url(admin)).set(database=name)))
    upgrade(engine)
    engine.dispose()
    yield name
    with psycopg.connect(_libpq(admin), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_database_url(tmp_path: Path, sqlite_template: Path) -> str:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copy(sqlite_template, data_dir / "arbiter.sqlite3")
    return sqlite_url(data_dir)


@pytest.fixture
def postgres_database_url(postgres_template: str | None) -> Iterator[str]:
    admin = postgres_admin_url()
    if admin is None or postgres_template is None:
        pytest.skip("PostgreSQL not available (set ARBITER_TEST_POSTGRES_URL)")
    name = f"arbiter_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(admin), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"')
    yield str(make_url(normalize_url(admin)).set(database=name).render_as_string(False))
    with psycopg.connect(_libpq(admin), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str:
    """A fresh migrated database on each backend in turn."""
    fixture = "sqlite_database_url" if request.param == "sqlite" else "postgres_database_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url, pool_size=5)
    yield engine
    held = engine.pool.checkedout()  # type: ignore[attr-defined]
    engine.dispose()
    # A connection still out would be closed by the garbage collector later, in
    # some other test, as an unraisable ResourceWarning: say which test left it.
    assert held == 0, (
        f"{held} database connection(s) still checked out after the test: close what"
        " holds them (a Runs service's batch threads: runs.close(), or the new_runs fixture)"
    )


@pytest.fixture
def new_runs() -> Iterator[Callable[..., Runs]]:
    """Runs services that are closed after the test (their batch threads each hold a
    database connection until then): `new_runs(storage, task_gate=...)`."""
    made: list[Runs] = []

    def make(storage: Storage, **options: Any) -> Runs:
        made.append(Runs(storage, **options))
        return made[-1]

    yield make
    for service in made:
        service.close()


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
