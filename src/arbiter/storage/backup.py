"""`arbiter db backup DEST` and `arbiter db restore SRC`.

SQLite: SQLite's online backup API copies every page in one step inside one
read transaction, so the copy is the database as of one commit, while the
server goes on writing (WAL lets readers and the writer proceed together).
The copy is a single self-contained file (rollback journal, not WAL).

PostgreSQL: `pg_dump --format=custom` (one repeatable-read snapshot, so
consistent while the server takes results) and `pg_restore --clean
--single-transaction` (all or nothing). The client programs must be of the
server's major version or newer. The password goes to them in PGPASSWORD,
never on a command line other users can read.

A restore replaces the whole database. It holds the primary's lease while it
runs, so it refuses while a primary serves that database (stop the primary and
every secondary first). A backup is written to `DEST.partial` and renamed, so
DEST is never a torn file; an existing DEST is refused, never overwritten.
Blocking: these run in the CLI process.
"""

import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from arbiter.storage.engine import normalize_url
from arbiter.storage.errors import LeaseHeld, StorageError
from arbiter.storage.lease import primary_lease
from arbiter.storage.libpq import libpq_conninfo

SQLITE_MAGIC = b"SQLite format 3\x00"
PG_DUMP_MAGIC = b"PGDMP"


class BackupError(StorageError):
    """A backup or restore that could not be done; nothing was changed."""


@dataclass(frozen=True, slots=True)
class Outcome:
    path: Path
    size: int
    revision: str | None  # the schema revision the copy holds


def backup(database_url: str, destination: Path) -> Outcome:
    url = make_url(normalize_url(database_url))
    if destination.exists():
        raise BackupError(f"{destination} already exists: choose a new file name")
    partial = destination.with_name(destination.name + ".partial")
    partial.unlink(missing_ok=True)
    # Readable by its owner alone from its first byte, whatever the umask: a
    # backup holds password hashes and session digests.
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        if url.get_backend_name() == "sqlite":
            revision = _sqlite_backup(_sqlite_path(url), partial)
        else:
            revision = _schema_revision_pg(url)
            _run(["pg_dump", "--format=custom", "--no-owner", f"--file={partial}"], url)
        _fsync(partial)
        partial.rename(destination)
        _fsync(destination.parent)
    finally:
        partial.unlink(missing_ok=True)
    return Outcome(destination, destination.stat().st_size, revision)


def restore(database_url: str, source: Path) -> Outcome:
    url = make_url(normalize_url(database_url))
    sqlite = url.get_backend_name() == "sqlite"
    _check_kind(source, SQLITE_MAGIC if sqlite else PG_DUMP_MAGIC, sqlite)
    if sqlite:
        _sqlite_path(url).parent.mkdir(parents=True, exist_ok=True)  # the lock file goes there
    lease = primary_lease(database_url)
    try:
        lease.acquire()  # refused while a primary serves the database: nothing is touched
    except LeaseHeld:
        raise LeaseHeld(
            "a primary is serving this database: stop it and every secondary before restoring"
        ) from None
    try:
        if sqlite:
            revision = _sqlite_restore(source, _sqlite_path(url))
        else:
            command = ["pg_restore", "--clean", "--if-exists", "--no-owner"]
            _run([*command, "--single-transaction", "--exit-on-error", str(source)], url)
            revision = _schema_revision_pg(url)
    finally:
        lease.release()
    return Outcome(source, source.stat().st_size, revision)


# --- SQLite


def _sqlite_path(url: URL) -> Path:
    if not url.database or url.database == ":memory:":
        raise BackupError("only a SQLite database in a file can be backed up or restored")
    return Path(url.database)


def _sqlite_backup(database: Path, partial: Path) -> str | None:
    if not database.exists():
        raise BackupError(f"no database at {database}")
    source = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    target = sqlite3.connect(partial)
    try:
        source.backup(target)  # all pages in one step: one consistent snapshot
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        return _revision(target)
    finally:
        target.close()
        source.close()


def _sqlite_restore(source: Path, database: Path) -> str | None:
    backup_db = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        revision = _revision(backup_db)
        if revision is None:
            raise BackupError(f"{source} holds no Arbiter database (no schema revision)")
        target = sqlite3.connect(database)
        try:
            backup_db.backup(target)  # replaces every page, under SQLite's own locks
            target.execute("PRAGMA journal_mode=WAL")
        finally:
            target.close()
    finally:
        backup_db.close()
    return revision


def _revision(connection: sqlite3.Connection) -> str | None:
    try:
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError:
        return None
    return str(row[0]) if row else None


# --- PostgreSQL


def _schema_revision_pg(url: URL) -> str | None:
    from arbiter.storage.engine import make_engine
    from arbiter.storage.migrate import current_revision

    engine = make_engine(url.render_as_string(hide_password=False), pool_size=1)
    try:
        return current_revision(engine)
    finally:
        engine.dispose()


def _run(command: list[str], url: URL) -> None:
    """A PostgreSQL client program against `url`, the password in its environment."""
    program = shutil.which(command[0])
    if program is None:
        raise BackupError(f"{command[0]} not found: install PostgreSQL's client programs")
    libpq = libpq_conninfo(url, with_password=False)
    environment = dict(os.environ)
    if url.password is not None:
        environment["PGPASSWORD"] = str(url.password)
    done = subprocess.run(  # noqa: S603 - our own argument list, no shell
        [program, *command[1:], f"--dbname={libpq}"],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        detail = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise BackupError(f"{command[0]} failed: {detail}")


# --- files


def _check_kind(source: Path, magic: bytes, sqlite: bool) -> None:
    try:
        with source.open("rb") as file:
            head = file.read(len(magic))
    except OSError as error:
        raise BackupError(f"cannot read {source}: {error.strerror or error}") from None
    if head != magic:
        expected = "a SQLite backup" if sqlite else "a pg_dump backup (arbiter db backup)"
        raise BackupError(f"{source} is not {expected} for this database")


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
