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
        "--data-dir",
        metavar="DIR",
        help=f"working directory: config, builds, logs (default ./{DEFAULT_DATA_DIR})",
    )


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
