"""`arbiter`: serve | db upgrade/backup/restore | users create/token/list | books | import |
signing-key | worker | demo | sample-engine.

This module parses arguments only. Each command's implementation is imported
when it runs, so the worker distribution (which ships this file without the
server's dependencies) never imports the web framework or database drivers.
"""

import argparse
import importlib.util
import sys
from collections.abc import Sequence

from arbiter import __version__
from arbiter.worker.arguments import (
    add_demo_parser,
    add_sample_engine_parser,
    add_worker_parser,
)


def _add_storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", help="data directory (default ./arbiter-data; env ARBITER_DATA_DIR)"
    )
    parser.add_argument(
        "--database-url",
        help="database URL: postgresql://... for PostgreSQL (default: SQLite file in the data dir; "
        "env ARBITER_DATABASE_URL)",
    )


def server_installed() -> bool:
    """Whether the server is installed here: the worker's distribution ships
    only the worker, protocol, stats and this file."""
    return importlib.util.find_spec("arbiter.web") is not None


def build_parser() -> argparse.ArgumentParser:
    """Every command, or where the server is not installed only `worker`: the
    others would end in an import error."""
    with_server = server_installed()
    parser = argparse.ArgumentParser(
        prog="arbiter",
        description="Distributed engine-testing server and worker."
        if with_server
        else "Arbiter's volunteer worker (the server's commands come with the server).",
    )
    parser.add_argument("--version", action="version", version=f"arbiter {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if with_server:
        _add_server_commands(commands)
    add_worker_parser(commands)
    if with_server:
        add_demo_parser(commands)  # it starts a server
        add_sample_engine_parser(commands)  # for a first test on this server
    return parser


def _add_server_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    serve = commands.add_parser("serve", help="run the web server and worker API")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1; env ARBITER_HOST)")
    serve.add_argument("--port", type=int, help="port (default 8000; env ARBITER_PORT)")
    serve.add_argument(
        "--role",
        choices=["primary", "secondary", "standby"],
        help="instance role (default primary); a standby waits for the primary's lease"
        " and then serves as the primary (PostgreSQL only)",
    )
    _add_storage_options(serve)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_commands.add_parser("upgrade", help="apply schema migrations")
    upgrade.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 0 if the schema is current, 3 if migrations are pending, "
        "4 if the database is newer than this Arbiter",
    )
    _add_storage_options(upgrade)
    backup = db_commands.add_parser(
        "backup", help="copy the database to DEST (consistent while the server runs)"
    )
    backup.add_argument("destination", metavar="DEST", help="a new file")
    _add_storage_options(backup)
    restore = db_commands.add_parser(
        "restore", help="replace the database with backup SRC (stop every server first)"
    )
    restore.add_argument("source", metavar="SRC", help="a file written by `arbiter db backup`")
    _add_storage_options(restore)

    users = commands.add_parser("users", help="manage accounts")
    user_commands = users.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    create = user_commands.add_parser("create", help="create an active account")
    create.add_argument("name")
    create.add_argument(
        "--password-stdin", action="store_true", required=True, help="read the password from stdin"
    )
    create.add_argument("--approver", action="store_true", help="make the account an approver")
    create.add_argument("--email", default="")
    _add_storage_options(create)
    token = user_commands.add_parser("token", help="print a new worker token for an account")
    token.add_argument("name")
    token.add_argument("--label", default="")
    _add_storage_options(token)
    _add_storage_options(user_commands.add_parser("list", help="list accounts"))
    _add_books_parser(commands)
    _add_import_parser(commands)
    signing = commands.add_parser(
        "signing-key",
        help="print the public key that signs the worker package (made on first use),"
        " for workers to pin: arbiter worker --server-key KEY",
    )
    signing.add_argument(
        "--data-dir", help="data directory (default ./arbiter-data; env ARBITER_DATA_DIR)"
    )


def _add_books_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    books = commands.add_parser("books", help="opening books")
    book_commands = books.add_subparsers(dest="books_command", required=True, metavar="ACTION")
    catalogue = book_commands.add_parser(
        "import-catalogue",
        help="replace the catalogue of official-stockfish/books with FILE (its books.json)",
    )
    catalogue.add_argument("file", help="a books.json: {name: {total, white, black, ..., sri}}")
    _add_storage_options(catalogue)
    _add_storage_options(book_commands.add_parser("list", help="list catalogue and hosted books"))


def _add_import_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    imports = commands.add_parser("import", help="import another server's database")
    sources = imports.add_subparsers(dest="import_source", required=True, metavar="SOURCE")
    fishtest = sources.add_parser(
        "fishtest", help="a mongodump of a Fishtest database (docs/migration.md)"
    )
    fishtest.add_argument(
        "dump_dir", metavar="DUMP_DIR", help="mongodump's output: <dir>/<database>/*.bson[.gz]"
    )
    fishtest.add_argument(
        "--merge", action="store_true", help="import into a database that already holds data"
    )
    fishtest.add_argument(
        "--nets-dir", help="the server's nn-*.nnue files (default: DUMP_DIR/nn when it exists)"
    )
    fishtest.add_argument(
        "--no-check", action="store_true", help="skip comparing the runs' statistics afterwards"
    )
    _add_storage_options(fishtest)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        from arbiter.commands.serve import serve_command

        return serve_command(args)
    if args.command in ("worker", "demo", "sample-engine"):
        from arbiter.worker import cli as worker_cli

        command = {
            "worker": worker_cli.worker_command,
            "demo": worker_cli.demo_command,
            "sample-engine": worker_cli.sample_engine_command,
        }[args.command]
        return command(args)
    if args.command == "import":
        from arbiter.commands.fishtest_import import import_command

        return import_command(args)
    from arbiter.commands.admin import run_admin_command

    return run_admin_command(args)


if __name__ == "__main__":
    sys.exit(main())
