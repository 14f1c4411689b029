"""Where a database stands against this code, `arbiter db upgrade --check`'s
exit statuses, and expand/contract: a secondary of older code serves on a newer
schema that says it may, a primary never does."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from arbiter.runtime.bootstrap import prepare_database
from arbiter.runtime.settings import SettingsError
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine, sqlite_url
from arbiter.storage.migrate import (
    COMPATIBILITY_KEY,
    head_revision,
    oldest_compatible,
    schema_status,
)
from arbiter.web.app import create_app
from tests.web.api_support import api_settings

NEWER = "9999"  # a revision this code has no script for


def pretend_newer(engine: Engine, oldest: str | None) -> None:
    """The database as a later Arbiter leaves it: an unknown revision, and what
    that revision says about the oldest code that may still use it."""
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": NEWER})
    with Storage(engine).write() as tx:
        tx.kv.set(COMPATIBILITY_KEY, {"revision": NEWER, "oldest_compatible": oldest})


def test_an_upgraded_database_records_the_oldest_code_that_may_use_it(engine: Engine) -> None:
    with Storage(engine).read() as tx:
        recorded = tx.kv.get(COMPATIBILITY_KEY)
    head = head_revision()
    assert recorded == {"revision": head, "oldest_compatible": oldest_compatible(head)}
    # 0006 (file chunks) only adds a table: the code of the revision before it still
    # works; 0003 is no expand, so it is where compatibility stops.
    assert oldest_compatible("0006") != "0006"
    assert oldest_compatible("0003") == "0003"
    assert schema_status(engine).state == "current"


def test_a_newer_schema_that_allows_this_code_serves_secondaries_only(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    pretend_newer(engine, oldest=head_revision())
    status = schema_status(engine)
    assert (status.state, status.current, status.oldest_compatible) == (
        "newer_compatible",
        NEWER,
        head_revision(),
    )
    assert prepare_database(engine, secondary=True) is False
    with pytest.raises(SettingsError, match="a primary must run the Arbiter of its schema"):
        prepare_database(engine)
    secondary = api_settings(tmp_path, database_url, role="secondary")
    with TestClient(create_app(secondary)) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["schema"] == {"database": NEWER, "code": head_revision()}
        assert client.get("/tests").status_code == 200


def test_a_newer_schema_that_dropped_this_codes_needs_is_refused(engine: Engine) -> None:
    pretend_newer(engine, oldest="8888")  # contracted past this code
    assert schema_status(engine).state == "newer"
    with pytest.raises(SettingsError, match="newer than this Arbiter; upgrade Arbiter"):
        prepare_database(engine, secondary=True)


def arbiter(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "arbiter", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_upgrade_check_exit_statuses(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    Path(data).mkdir()
    pending = arbiter("db", "upgrade", "--check", "--data-dir", data)
    assert pending.returncode == 3, pending
    assert "migrations pending" in pending.stdout
    created = arbiter("db", "upgrade", "--data-dir", data)
    assert (created.returncode, created.stdout.strip().splitlines()[-1]) == (
        0,
        f"database schema created (revision {head_revision()})",
    )
    again = arbiter("db", "upgrade", "--data-dir", data)
    assert again.stdout.strip().splitlines()[-1] == (
        f"database schema is up to date ({head_revision()})"
    )
    current = arbiter("db", "upgrade", "--check", "--data-dir", data)
    assert (current.returncode, current.stdout.strip()) == (
        0,
        f"database schema is up to date ({head_revision()})",
    )
    engine = make_engine(sqlite_url(Path(data)))
    pretend_newer(engine, oldest=head_revision())
    engine.dispose()
    newer = arbiter("db", "upgrade", "--check", "--data-dir", data)
    assert newer.returncode == 4, newer
    assert "secondaries of this version may still serve" in newer.stdout
    unreachable = arbiter(
        "db", "upgrade", "--check", "--database-url", "postgresql://x@127.0.0.1:9/x"
    )
    assert unreachable.returncode == 2
