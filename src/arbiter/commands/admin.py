"""Operator commands: `arbiter db upgrade`, `arbiter users ...` and `arbiter books ...`."""

import argparse
import json
import sys
from pathlib import Path

from arbiter.domain.actions import SYSTEM_USER
from arbiter.domain.errors import DomainError, ValidationError
from arbiter.domain.files import worker_package
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.files.data_dir_import import import_data_dir_files
from arbiter.domain.runs import chi2_summaries, contribution_totals
from arbiter.runtime.bootstrap import (
    check_files,
    file_store,
    make_accounts,
    open_storage,
    settings_from_args,
    worker_signing_key,
)
from arbiter.runtime.settings import Settings, SettingsError
from arbiter.storage import Storage
from arbiter.storage.backup import BackupError, backup, restore
from arbiter.storage.engine import describe_url, make_engine, probe
from arbiter.storage.errors import DatabaseNotOpened, LeaseHeld
from arbiter.storage.migrate import schema_status, upgrade
from arbiter.storage.object_store import ObjectStoreError


def run_admin_command(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
        command = _COMMANDS.get(args.command, users_command)
        return command(args, settings)
    except (DomainError, SettingsError) as error:
        print(f"arbiter: {error}", file=sys.stderr)
        return 1
    except (DatabaseNotOpened, LeaseHeld, ObjectStoreError) as error:  # the operator's setup
        print(f"arbiter: {error}", file=sys.stderr)
        return 2
    except BackupError as error:
        print(f"arbiter: {error}", file=sys.stderr)
        return 1


def db_command(args: argparse.Namespace, settings: Settings) -> int:
    url = settings.resolved_database_url
    if args.db_command == "backup":
        done = backup(url, Path(args.destination))
        print(f"backed up schema {done.revision} to {done.path} ({done.size} bytes)")
        return 0
    if args.db_command == "restore":
        done = restore(url, Path(args.source))
        print(f"restored {done.path} (schema {done.revision}) into {describe_url(url)}")
        return 0
    if args.check:
        return db_check(settings)
    return db_upgrade(settings)


# `db upgrade --check` exit statuses, for deployment scripts (2: no database).
CHECK_CURRENT, CHECK_PENDING, CHECK_NEWER = 0, 3, 4


def db_check(settings: Settings) -> int:
    """Say where the schema stands and exit with a status a script can act on."""
    engine = make_engine(settings.resolved_database_url, pool_size=1)
    try:
        probe(engine)
        status = schema_status(engine)
    finally:
        engine.dispose()
    if status.state == "current":
        print(f"database schema is up to date ({status.current})")
        return CHECK_CURRENT
    if status.state in ("empty", "behind"):
        print(f"migrations pending: database at {status.current}, this Arbiter at {status.head}")
        return CHECK_PENDING
    usable = (
        "secondaries of this version may still serve"
        if status.state == "newer_compatible"
        else "upgrade Arbiter"
    )
    print(f"database at {status.current} is newer than this Arbiter ({status.head}): {usable}")
    return CHECK_NEWER


def db_upgrade(settings: Settings) -> int:
    engine = make_engine(settings.resolved_database_url, pool_size=1)
    try:
        probe(engine)
        check_files(settings)
        before = schema_status(engine)
        upgrade(engine)
        after = schema_status(engine)
        storage = Storage(engine)
        if not contribution_totals.built(storage):
            print("building the contributor totals from every task (once)")
            contribution_totals.rebuild(storage)
        if scored := chi2_summaries.score_large_runs(storage):
            print(f"kept the workers' χ² of {scored} large finished run(s)")
        files = file_store(storage, settings)
        report = import_data_dir_files(storage, settings.data_dir, files)
    finally:
        engine.dispose()
    where = "the object store" if settings.files_s3_bucket else "the database"
    for name in report.imported:
        print(f"stored in {where}: {name}")
    for problem in report.problems:
        print(f"arbiter: not stored: {problem}", file=sys.stderr)
    print(upgrade_summary(before.state, before.current, after.current))
    return 0


def upgrade_summary(state: str, before: str | None, after: str | None) -> str:
    """What `db upgrade` did, from the schema's state and revision before and after."""
    if state == "empty":
        return f"database schema created (revision {after})"
    if before != after:
        return f"database schema upgraded from {before} to {after}"
    return f"database schema is up to date ({after})"


def books_command(args: argparse.Namespace, settings: Settings) -> int:
    """`books import-catalogue FILE` (a running server picks it up within a
    minute) and `books list`."""
    with open_storage(settings) as storage:
        library = BookLibrary(storage, settings.data_dir / "books")
        library.load()
        if args.books_command == "import-catalogue":
            document = _read_json(Path(args.file))
            count = library.import_catalogue(document, SYSTEM_USER)
            print(f"imported a catalogue of {count} books", file=sys.stderr)
            return 0
        for book in library.catalogue():
            print(f"{book.name}\tcatalogue\t{book.total}\t{book.sri}")
        for hosted in library.list():
            print(f"{hosted.name}\thosted\t{hosted.total}\t{hosted.sri}")
    return 0


def _read_json(path: Path) -> dict[str, object]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValidationError("file", f"cannot read {path}: {error}") from None
    if not isinstance(document, dict):
        raise ValidationError("file", f"{path}: expected a JSON object of books by name")
    return document


def users_command(args: argparse.Namespace, settings: Settings) -> int:
    with open_storage(settings) as storage:
        accounts = make_accounts(storage, settings)
        if args.users_command == "create":
            password = sys.stdin.readline().rstrip("\r\n")
            user = accounts.create_user(
                args.name, password, email=args.email, approver=args.approver
            )
            role = "approver" if user.is_approver else "user"
            print(f"created {role} {user.username}", file=sys.stderr)
        elif args.users_command == "token":
            print(accounts.create_token(args.name, args.label))
        else:
            for user in accounts.list_users():
                print(
                    f"{user.username}\t{_status(user.pending, user.blocked)}\t"
                    f"{'approver' if user.is_approver else ''}\t{user.email}"
                )
    return 0


def _status(pending: bool, blocked: bool) -> str:
    return "blocked" if blocked else "pending" if pending else "active"


def signing_key_command(args: argparse.Namespace, settings: Settings) -> int:
    """Print the public key of the worker package's signing key (made when missing)."""
    print(worker_package.public_key_of(worker_signing_key(settings)))
    return 0


_COMMANDS = {"db": db_command, "books": books_command, "signing-key": signing_key_command}
