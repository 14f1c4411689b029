"""A restart under a fleet of password workers: every one is back at work,
and none is told anything final.

Official Fishtest workers send their account password on every call, and a
restarted server knows none of them yet. The server runs with production
argon2 costs (OWASP minimum), pinned to one core; the load generator runs on
the other. The fleet:

1. `--accounts` accounts share `--workers` workers (Fishtest's history has about
   400 accounts behind 10,000 machines; `--accounts` up to `--workers`), each
   account's password checked once by a first server (argon2);
2. that server stops (SIGTERM, as a deploy restarts it) and a new one starts on
   the same port;
3. every worker reconnects at a random moment within `--window` seconds of the
   restart: request_version, then request_task, each retried as the official
   worker retries it (a reply that is not a JSON object: 15 s later, doubling;
   a refused connection likewise), until both are served.

Measured: the seconds from the restart until every worker is served, the
replies a worker would take as final (a JSON object with `error`: goal 0),
temporary refusals, the new server's CPU, and the call latency. The same
herd runs again after a restart without the worker-proof key (as on a server
that keeps no proofs, or has lost its key): every account then needs argon2
once more, in the same run, on the same machine.

    .venv/bin/python bench/restart_herd.py [--workers N] [--accounts N]
        [--window S] [--database-url URL] [--write]
"""

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from argon2 import PasswordHasher, Type

from arbiter.runtime.bootstrap import WORKER_PROOF_KEY_FILE, open_storage
from arbiter.runtime.settings import Settings
from arbiter.storage.base import NewUser
from bench.lib.harness import cpu_seconds, port_of, run_scenario, scratch_dir, start_arbiter
from bench.lib.httpclient import HttpError, Pool
from tests.web.live_server import PASSWORD, Server, stop
from tests.web.official_replies import Outcome, outcome

DEFAULTS = Settings()
PRODUCTION_ARGON2 = {
    "ARBITER_ARGON2_TIME_COST": str(DEFAULTS.argon2_time_cost),
    "ARBITER_ARGON2_MEMORY_KIB": str(DEFAULTS.argon2_memory_kib),
}
RETRY_START, RETRY_MAX = 15.0, 900.0  # s: the official worker's wait, doubling
CONNECTIONS = 1000  # as a proxy's upstream connections (a worker opens one per call)
SCRIPT = "restart_herd"
TITLES = {"herd": "A restart under 10,000 password workers"}


@dataclass
class Herd:
    """What one reconnecting fleet saw."""

    served_at: list[float] = field(default_factory=list)  # s after the restart
    waits: list[float] = field(default_factory=list)  # s from a worker's first call to served
    latencies: list[float] = field(default_factory=list)  # ms, served calls
    final: Counter[str] = field(default_factory=Counter)  # by endpoint
    temporary: Counter[int] = field(default_factory=Counter)  # by status
    transport: Counter[str] = field(default_factory=Counter)  # by kind
    cpu: float = 0.0  # server CPU s from the restart until all were served
    restart: float = 0.0  # s from stopping the old server to the new one serving
    started: float = field(default_factory=time.monotonic)  # the herd's clock


def worker_body(index: int, accounts: int) -> dict[str, object]:
    name = f"herd{index % accounts}"
    info = {
        "username": name,
        "uname": "Linux 6.1",
        "architecture": ["64bit", "ELF"],
        "concurrency": 4,
        "max_memory": 8000,
        "min_threads": 1,
        "version": 325,
        "python_version": [3, 11, 7],
        "gcc_version": [12, 2, 0],
        "compiler": "g++",
        "unique_key": f"{index:08x}-1234-5678-9abc-def012345678",
        "modified": False,
        "ARCH": "?",
        "nps": 0.0,
        "near_github_api_limit": False,
        "worker_arch": "x86-64-bmi2",
    }
    return {"password": PASSWORD, "worker_info": info}


def create_accounts(data_dir: Path, database_url: str, accounts: int) -> None:
    """Active accounts with the fleet's password, hashed once at production cost
    (a hash verifies for every account: the salt is in it)."""
    hasher = PasswordHasher(
        time_cost=DEFAULTS.argon2_time_cost,
        memory_cost=DEFAULTS.argon2_memory_kib,
        parallelism=DEFAULTS.argon2_parallelism,
        type=Type.ID,
    )
    password_hash = hasher.hash(PASSWORD)
    settings = Settings(data_dir=data_dir, database_url=database_url)
    with open_storage(settings) as storage, storage.write() as tx:
        for index in range(accounts):
            name = f"herd{index}"
            record = NewUser(name, f"{name}@example.org", password_hash, time.time(), False)
            tx.users.add(record)


async def call(pool: Pool, path: str, body: bytes, herd: Herd) -> Outcome:
    """One call as the official worker makes it, counted; what the worker does
    with the reply (a transport failure it retries)."""
    started = time.monotonic()
    try:
        reply = await pool.request("POST", path, body, timeout=30.0)
    except HttpError as error:
        herd.transport[error.kind] += 1
        return Outcome.RETRIED
    taken = outcome(path, reply.body)
    if taken is Outcome.SERVED:
        herd.latencies.append((time.monotonic() - started) * 1000)
    elif taken is Outcome.FINAL:
        herd.final[path] += 1  # request_version's `error`: the official worker exits
    else:
        herd.temporary[reply.status] += 1
    return taken


async def reconnect(pool: Pool, index: int, args: argparse.Namespace, herd: Herd) -> None:
    await asyncio.sleep(random.uniform(0, args.window))
    first_call = time.monotonic()
    body = json.dumps(worker_body(index, args.accounts)).encode()
    wait = RETRY_START
    for path in ("/api/request_version", "/api/request_task"):
        while (taken := await call(pool, path, body, herd)) is not Outcome.SERVED:
            if taken is Outcome.FINAL:
                return  # this worker has exited
            await asyncio.sleep(wait * random.uniform(1.0, 1.1))
            wait = min(wait * 2, RETRY_MAX)
    herd.served_at.append(time.monotonic() - herd.started)
    herd.waits.append(time.monotonic() - first_call)


async def run_herd(server: Server, args: argparse.Namespace) -> Herd:
    herd = Herd()
    pool = Pool("127.0.0.1", port_of(server), CONNECTIONS)
    cpu_before = cpu_seconds(server.process.pid)
    try:
        await asyncio.gather(*(reconnect(pool, i, args, herd) for i in range(args.workers)))
    finally:
        pool.close()
    herd.cpu = cpu_seconds(server.process.pid) - cpu_before
    return herd


def restarted(
    old: Server, data_dir: Path, args: argparse.Namespace, env: dict[str, str]
) -> tuple[Server, float]:
    """The server stopped (SIGTERM) and started again on its port; the seconds taken."""
    started = time.monotonic()
    stop(old)
    new = start_arbiter(data_dir, args.database_url, port_of(old), extra_env=env)
    return new, time.monotonic() - started


async def warm_up(server: Server, args: argparse.Namespace) -> None:
    """Each account's password checked once, by the server before the restart."""
    pool = Pool("127.0.0.1", port_of(server), 8)
    herd = Herd()

    async def prove(account: int) -> None:
        body = json.dumps(worker_body(account, args.accounts)).encode()
        while await call(pool, "/api/request_version", body, herd) is not Outcome.SERVED:
            await asyncio.sleep(0.2)

    limit = asyncio.Semaphore(4)

    async def bounded(account: int) -> None:
        async with limit:
            await prove(account)

    try:
        await asyncio.gather(*(bounded(account) for account in range(args.accounts)))
    finally:
        pool.close()


def report(name: str, herd: Herd, args: argparse.Namespace) -> list[str]:
    served = len(herd.served_at)
    last = max(herd.served_at, default=float("nan"))
    p50 = statistics.median(herd.latencies) if herd.latencies else float("nan")
    p95 = statistics.quantiles(herd.latencies, n=20)[18] if len(herd.latencies) > 20 else p50
    waits = sorted(herd.waits) or [float("nan")]
    wait_p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    return [
        f"| {name} | {served:,} of {args.workers:,} | {last:.1f} s"
        f" | {wait_p99:.2f} / {waits[-1]:.2f} s | {sum(herd.final.values())}"
        f" | {sum(herd.temporary.values())} | {sum(herd.transport.values())}"
        f" | {herd.cpu:.1f} s | {p50:.1f} / {p95:.1f} ms | {herd.restart:.1f} s |"
    ]


async def herd(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    env = {**PRODUCTION_ARGON2, "ARBITER_LOG_LEVEL": "warning"}
    with scratch_dir("arbiter-herd-") as scratch:
        data_dir = scratch / "data"
        data_dir.mkdir()
        create_accounts(data_dir, args.database_url, args.accounts)
        first = start_arbiter(data_dir, args.database_url, extra_env=env)
        await warm_up(first, args)
        rows: list[str] = []
        failed: list[str] = []
        server = first
        variants = [("with worker proofs", True), ("without (key removed)", False)]
        for name, keep_key in variants[: 1 if args.proofs_only else 2]:
            if not keep_key:
                (data_dir / WORKER_PROOF_KEY_FILE).unlink()
            server, restart = restarted(server, data_dir, args, env)
            try:
                result = await run_herd(server, args)
            except BaseException:
                stop(server)
                raise
            result.restart = restart
            rows += report(name, result, args)
            if result.final:
                failed.append(f"{name}: final refusals {dict(result.final)}")
            if len(result.served_at) < args.workers:
                failed.append(f"{name}: {args.workers - len(result.served_at)} never served")
        stop(server)
    backend = "PostgreSQL" if args.database_url else "SQLite"
    lines = [
        f"{args.workers:,} official-protocol workers on {args.accounts:,} accounts reconnect within"
        f" {args.window:g} s of a restart ({backend}, production argon2 costs):",
        "",
        "| restart | served | all served after | a worker's wait p99 / max | final refusals"
        " | temporary refusals | transport failures | server CPU | p50 / p95 served call"
        " | restart took |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    return lines, failed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--accounts", type=int, default=400)
    parser.add_argument("--window", type=float, default=60.0, help="s the reconnects spread over")
    parser.add_argument(
        "--database-url", default="", help="an empty PostgreSQL database; empty: SQLite"
    )
    parser.add_argument(
        "--proofs-only", action="store_true", help="skip the restart without the key"
    )
    parser.add_argument("--write", action="store_true", help="put the table in the docs")
    args = parser.parse_args(argv)
    args.scenario = "herd"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_scenario(SCRIPT, {"herd": herd}, TITLES, args)


if __name__ == "__main__":
    raise SystemExit(main())
