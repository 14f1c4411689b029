"""Upgrading a data dir of before revision 0006: the files its rows describe are
copied into the database, a file that is missing or not the one recorded is
reported and left alone, and a second run does nothing."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from arbiter.domain.files.data_dir_import import import_data_dir_files
from arbiter.domain.files.stored import BOOK, NET, StoredFile
from arbiter.protocol.books import BookHasher
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine, sqlite_url
from arbiter.storage.migrate import upgrade
from arbiter.storage.records import BookRecord, NetRecord
from tests.domain.files.support import stored_bytes
from tests.s3_server import S3Bucket

NET_BYTES = b"NNUE" + bytes(range(256)) * 10
BOOK_BYTES = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"


def sri(data: bytes) -> str:
    hasher = BookHasher()
    hasher.update(data)
    return hasher.sri()


def old_layout(storage: Storage, data_dir: Path) -> tuple[str, str]:
    """Rows as an older Arbiter left them, their bytes only in the data dir."""
    name = f"nn-{hashlib.sha256(NET_BYTES).hexdigest()[:12]}.nnue"
    net = NetRecord(
        name,
        "alice",
        hashlib.sha256(NET_BYTES).hexdigest(),
        len(NET_BYTES),
        1.0,
        0,
        False,
        None,
        None,
    )
    book = BookRecord("e4.epd", "alice", sri(BOOK_BYTES), len(BOOK_BYTES), 1, 1.0)
    lost = BookRecord("lost.epd", "alice", sri(b"x\n"), 2, 1, 1.0)
    with storage.write() as tx:
        tx.nets.add(net)
        tx.books.add(book)
        tx.books.add(lost)
    (data_dir / "nets").mkdir(parents=True)
    (data_dir / "books").mkdir()
    (data_dir / "nets" / name).write_bytes(NET_BYTES)
    (data_dir / "books" / "e4.epd").write_bytes(b"not the book\n" + BOOK_BYTES[13:])
    return name, "e4.epd"


def test_recorded_files_are_copied_in_and_others_reported(storage: Storage, tmp_path: Path) -> None:
    net_name, book_name = old_layout(storage, tmp_path)
    report = import_data_dir_files(storage, tmp_path)
    assert report.imported == [f"net {net_name}"]
    wrong = tmp_path / "books" / book_name
    assert report.problems == [
        f"book {book_name}: {wrong} is not the file recorded (hash differs)",
        f"book lost.epd: no file at {tmp_path / 'books' / 'lost.epd'} (its bytes are not stored)",
    ]
    stored = StoredFile(NET, net_name, len(NET_BYTES), "")
    assert stored_bytes(storage, stored) == NET_BYTES
    with storage.read() as tx:
        assert tx.file_chunks.count(BOOK, book_name) == 0
    (tmp_path / "books" / book_name).write_bytes(BOOK_BYTES)  # the operator puts it back
    again = import_data_dir_files(storage, tmp_path)
    assert again.imported == [f"book {book_name}"]  # the net is not copied twice


def test_db_upgrade_copies_them(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    engine = make_engine(sqlite_url(data_dir))
    upgrade(engine)
    net_name, _book = old_layout(Storage(engine), data_dir)
    engine.dispose()
    done = subprocess.run(
        [sys.executable, "-m", "arbiter", "db", "upgrade", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"stored in the database: net {net_name}" in done.stdout
    assert "not stored: book e4.epd" in done.stderr


def test_db_upgrade_copies_them_into_the_configured_bucket(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    engine = make_engine(sqlite_url(data_dir))
    upgrade(engine)
    net_name, _book = old_layout(Storage(engine), data_dir)
    engine.dispose()
    done = subprocess.run(
        [sys.executable, "-m", "arbiter", "db", "upgrade", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, **s3_bucket.env()},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"stored in the object store: net {net_name}" in done.stdout
    sha256 = hashlib.sha256(NET_BYTES).hexdigest()
    assert f"arbiter/nets/{net_name}/{sha256}" in s3_bucket.object_keys()
