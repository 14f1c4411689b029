"""The flags of `arbiter worker` and `arbiter demo`.

Imports nothing but argparse: `arbiter serve` builds this parser too, and
should not load the worker to do so.
"""

import argparse
from typing import Any

CONFIG_NAME = "worker.ini"
DEFAULT_DATA_DIR = "arbiter-worker"
DEFAULT_CONCURRENCY = "max(1,min(3,MAX-1))"
DEFAULT_MAX_MEMORY = "MAX/2"
# The environment variable a token may come from (never saved).
TOKEN_VARIABLE = "ARBITER_WORKER_TOKEN"  # noqa: S105 - a name, not a secret


def add_worker_parser(commands: Any) -> None:
    worker = commands.add_parser(
        "worker",
        help="run a volunteer worker: build engines, play games, report",
        description="Run a worker. Flags are saved in the data directory's "
        f"{CONFIG_NAME}, so later starts need none.",
    )
    worker.add_argument(
        "--server", metavar="URL", help="server URL, e.g. https://arbiter.example.org"
    )
    worker.add_argument("--username", metavar="NAME", help="your account name")
    secret = worker.add_mutually_exclusive_group()
    secret.add_argument("--password", metavar="PASSWORD", help="your account password")
    secret.add_argument(
        "--token", metavar="TOKEN", help="a worker token (arbiter users token, or your profile)"
    )
    secret.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the worker token from this file (mode 0600 or stricter), so it is not "
        f"seen in the process list; or set {TOKEN_VARIABLE}",
    )
    worker.add_argument(
        "--concurrency",
        metavar="EXPR",
        help=f"cores to use, an expression of MAX = this machine's cores "
        f"(default {DEFAULT_CONCURRENCY})",
    )
    worker.add_argument(
        "--max-memory",
        metavar="EXPR",
        help=f"MiB to use, an expression of MAX = RAM (default {DEFAULT_MAX_MEMORY})",
    )
    worker.add_argument(
        "--min-threads", metavar="N", help="refuse runs with fewer threads per game (default 1)"
    )
    worker.add_argument(
        "--uuid-prefix",
        metavar="PREFIX",
        help="2-8 letters/digits naming this machine (default _hw: from hardware)",
    )
    worker.add_argument(
        "--fleet",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="exit when the server has no work instead of waiting",
    )
    worker.add_argument("--compiler", choices=["g++", "clang++"], help="compiler for builds")
    worker.add_argument(
        "--server-key",
        metavar="KEY",
        help="the server's package signing key (its operator's `arbiter signing-key`); "
        "default: the key the server first announces, pinned from then on",
    )
    worker.add_argument(
        "--allow-http-updates",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let self-update download over plain http from a server that is not on "
        "this machine (default: no)",
    )
    worker.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"working directory: config, builds, logs (default ./{DEFAULT_DATA_DIR})",
    )
    _add_worker_actions(worker)


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the worker's data directory (default ./{DEFAULT_DATA_DIR})",
    )


def _add_worker_actions(worker: argparse.ArgumentParser) -> None:
    """`arbiter worker status` and `arbiter worker install-service` (no action: run)."""
    actions = worker.add_subparsers(dest="worker_action", metavar="[ACTION]")
    status = actions.add_parser(
        "status", help="what the worker of a data directory is doing (from its status.json)"
    )
    _add_data_dir(status)
    status.add_argument("--json", action="store_true", help="print the state file as it is")
    service = actions.add_parser(
        "install-service",
        help="write a systemd unit running this worker (Linux)",
        description="Write a systemd unit that runs `arbiter worker --data-dir DIR` with the "
        f"settings of DIR/{CONFIG_NAME}, the token read from a 0600 file.",
    )
    _add_data_dir(service)
    scope = service.add_mutually_exclusive_group()
    scope.add_argument(
        "--user", dest="system", action="store_false", help="a user unit (the default)"
    )
    scope.add_argument(
        "--system", dest="system", action="store_true", help="a system unit (needs root)"
    )
    service.set_defaults(system=False)  # store_false would make the default True
    service.add_argument(
        "--token-file", metavar="PATH", help="the 0600 file holding the worker token (saved)"
    )
    service.add_argument("--name", default="arbiter-worker", help="the unit's name")
    service.add_argument(
        "--output", metavar="PATH", help="write the unit here instead of where systemd looks"
    )


def add_sample_engine_parser(commands: Any) -> None:
    sample = commands.add_parser(
        "sample-engine",
        help="make a small engine repository to test with (no network needed)",
        description="Make a git repository with two branches around Debian's Stockfish "
        "(master, and stronger: 5x the nodes per move) and print how to submit a test of it.",
    )
    sample.add_argument("dir", metavar="DIR", help="where to make it (a new or empty directory)")


def add_demo_parser(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="start a server, a sample engine, an SPRT test and a worker, locally"
    )
    demo.add_argument("--port", metavar="PORT", type=int, help="server port (default: a free one)")
    demo.add_argument(
        "--dir", metavar="DIR", help="keep the demo's files here (default: a temporary directory)"
    )
    demo.add_argument(
        "--exit", action="store_true", help="stop the server when the test is finished"
    )
