"""Opening a database at start-up: a URL we cannot use and a database that does
not answer are each one clear line (DatabaseNotOpened), never a driver traceback."""

import re
from pathlib import Path

import pytest

from arbiter.storage.engine import describe_url, make_engine, probe
from arbiter.storage.errors import DatabaseNotOpened
from tests.storage.test_unavailable import closed_port


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://root@localhost/arbiter", "unsupported database URL scheme 'mysql'"),
        ("postgresql+asyncpg://u@h/d", "unsupported database URL scheme 'postgresql+asyncpg'"),
        ("not a url", "cannot parse the database URL"),
    ],
)
def test_an_unsupported_url_is_refused_before_any_driver_loads(url: str, says: str) -> None:
    with pytest.raises(DatabaseNotOpened, match=re.escape(says)):
        make_engine(url)


def test_every_form_we_document_is_accepted() -> None:
    for url in ("postgres://u@h/d", "postgresql://u@h/d", "postgresql+psycopg://u@h/d"):
        make_engine(url).dispose()


def test_an_unreachable_postgresql_is_one_line_without_the_password() -> None:
    engine = make_engine(f"postgresql://arbiter:s3cret@127.0.0.1:{closed_port()}/arbiter")
    try:
        with pytest.raises(DatabaseNotOpened) as failed:
            probe(engine)
    finally:
        engine.dispose()
    message = str(failed.value)
    assert message.startswith("cannot reach the database postgresql://arbiter:***@127.0.0.1:")
    assert "s3cret" not in message
    assert "\n" not in message


def test_a_database_that_answers_passes_the_probe(database_url: str) -> None:
    engine = make_engine(database_url, pool_size=1)
    try:
        probe(engine)
    finally:
        engine.dispose()


def test_a_sqlite_file_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "arbiter.sqlite3").mkdir()  # a directory where the file should be
    engine = make_engine(f"sqlite:///{tmp_path / 'arbiter.sqlite3'}")
    try:
        with pytest.raises(DatabaseNotOpened, match="cannot reach the database sqlite:///"):
            probe(engine)
    finally:
        engine.dispose()


def test_a_data_dir_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a directory")
    with pytest.raises(DatabaseNotOpened, match="cannot create the data directory"):
        make_engine(f"sqlite:///{tmp_path / 'taken' / 'arbiter.sqlite3'}")


def test_shown_urls_have_no_driver_and_no_password() -> None:
    shown = describe_url("postgresql+psycopg://a:pw@h:5432/d")
    assert shown == "postgresql://a:***@h:5432/d"
