"""Floods a public instance meets, beside honest traffic, on a real `arbiter serve`.

Run:
  .venv/bin/python bench/flood.py queries [--clients 100] [--seconds 60] [--rounds 3]
      [--actions 200000]
      [--queries or,regex] [--database-url postgresql://.../empty_db] [--write]
  .venv/bin/python bench/flood.py idle [--held 400] [--write]
  .venv/bin/python bench/flood.py ranges [--clients 30] [--seconds 30] [--against REV] [--write]

queries: N clients post the event log's worst queries to /api/actions without
  pause (half an `$or` of 100 message values, which no index serves; half a
  `$regex` no message matches, checked row by row), over an event log of
  `--actions` actions. An honest page (/tests) and an honest worker call
  (request_version) are timed in turn, alone and then beside the flood, in
  `--rounds` turns sharing `--seconds` of each; the gate: their p99 beside it
  at most twice their p99 alone. On PostgreSQL the
  longest-running statement is sampled from pg_stat_activity meanwhile (a
  search's deadline is 2 s).
idle: one address (127.0.0.2) opens `--held` connections and leaves them idle,
  with ARBITER_MAX_CONNECTIONS at `--cap`; then another address makes 70
  requests: the gate is that none fails.
ranges: N clients ask for one byte of a 20 MiB net without pause, each at a
  random place; an honest page is timed alone and beside them, here and on
  REV (`--against`). No pause makes this a request flood as much as a range
  test: the figure that shows the ranges' own cost is how many are answered
  a second, and the honest page's slowdown beside the same clients.
Server pinned to CPU 0, this generator to CPU 1. Exit status 1 when a gate fails.
"""

import argparse
import asyncio
import contextlib
import hashlib
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2 as httpx

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arbiter.runtime.bootstrap import open_storage
from arbiter.runtime.settings import Settings
from bench.lib import harness
from bench.lib.fleetsim import percentile
from tests.web.live_server import CHEAP_HASHING, PASSWORD, Server

PROBE_GAP = 0.05  # s between two honest requests
WARM_UP = 3.0  # s of flood before the honest requests are timed beside it
GOAL_RATIO = 2.0
NET_BYTES = 20 * 1024 * 1024
WORST_QUERIES = {
    "or": {"$or": [{"message": f"no such message {n}"} for n in range(100)]},
    "regex": {"message": {"$regex": "^no action says (this|that)$"}},
}


# ---------------------------------------------------------------- honest traffic


Probe = Callable[[httpx.AsyncClient], Awaitable[int]]


async def honest_latencies(
    server: Server, probes: dict[str, Probe], seconds: float
) -> dict[str, list[float]]:
    """Each probe in turn, one request every PROBE_GAP, for `seconds`: ms each."""
    found: dict[str, list[float]] = {name: [] for name in probes}
    stop_at = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        while time.monotonic() < stop_at:
            for name, probe in probes.items():
                started = time.perf_counter()
                status = await probe(client)
                if status != 200:
                    raise RuntimeError(f"honest {name}: {status}")
                found[name].append((time.perf_counter() - started) * 1000)
                await asyncio.sleep(PROBE_GAP)
    return found


def page_probe(path: str) -> Probe:
    async def probe(client: httpx.AsyncClient) -> int:
        return (await client.get(path)).status_code

    return probe


def worker_probe(username: str, token: str) -> Probe:
    body = {"password": token, "worker_info": {"username": username}}

    async def probe(client: httpx.AsyncClient) -> int:
        return (await client.post("/api/request_version", json=body)).status_code

    return probe


def compare(
    alone: dict[str, list[float]], beside: dict[str, list[float]], what: str
) -> tuple[list[str], list[str]]:
    lines = [
        f"| honest request | p50 alone | p99 alone | p50 beside {what} | p95 beside | p99 beside"
        " | ratio of p99 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    failed = []
    for name, solo in alone.items():
        before, during = percentile(solo, 99), percentile(beside[name], 99)
        ratio = during / before
        lines.append(
            f"| {name} | {percentile(solo, 50):.1f} ms | {before:.1f} ms"
            f" | {percentile(beside[name], 50):.1f} ms | {percentile(beside[name], 95):.1f} ms"
            f" | {during:.1f} ms | x{ratio:.2f} |"
        )
        if ratio > GOAL_RATIO:
            failed.append(f"{name}: p99 x{ratio:.2f} beside {what} (goal x{GOAL_RATIO})")
    return lines, failed


# ---------------------------------------------------------------- queries


def seed_actions(data_dir: Path, database_url: str, count: int) -> None:
    """`count` actions of a few kinds by 400 users over a year, in bulk."""
    generator = random.Random(7)
    settings = Settings(data_dir=data_dir, database_url=database_url)
    kinds = ("new_run", "approve_run", "finished_run", "upload_nn", "log_message")
    start = time.time() - 365 * 86400
    with open_storage(settings) as storage:
        for first in range(0, count, 5000):
            rows = [
                {
                    "time": start + index * 365 * 86400 / count,
                    "action": generator.choice(kinds),
                    "username": f"user{generator.randrange(400)}",
                    "message": f"run {index} of the benchmark with words {generator.random():.6f}",
                    "run_id": None,
                    "run": None,
                    "task_id": None,
                    "worker": None,
                    "user": None,
                    "data": None,
                    "fishtest_id": None,
                }
                for index in range(first, min(count, first + 5000))
            ]
            with storage.write() as tx:
                tx.imports.add_actions(rows)


async def flood_queries(
    server: Server,
    queries: list[dict[str, object]],
    *,
    clients: int,
    stop: asyncio.Event,
    outcomes: Counter[str],
    slowest: list[float],
) -> None:
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:

        async def one(index: int) -> None:
            query = queries[index % len(queries)]
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    reply = await client.post("/api/actions", json=query)
                    outcomes[str(reply.status_code)] += 1
                    slowest[0] = max(slowest[0], time.perf_counter() - started)
                    if reply.status_code == 503:
                        # As told, give or take: clients are not in step.
                        wait = float(reply.headers.get("retry-after", "1"))
                        await asyncio.sleep(wait * random.uniform(0.5, 1.5))
                except httpx.HTTPError as error:
                    outcomes[type(error).__name__] += 1

        await asyncio.gather(*(one(index) for index in range(clients)))


async def longest_statement(database_url: str, stop: asyncio.Event) -> float:
    """The longest a statement of the benchmark's database ran, sampled every 0.2 s."""
    if not database_url.startswith("postgresql"):
        return float("nan")
    import psycopg

    longest = 0.0
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as connection:
        while not stop.is_set():
            cursor = await connection.execute(
                "SELECT coalesce(max(extract(epoch FROM now() - query_start)), 0)"
                " FROM pg_stat_activity WHERE state = 'active' AND datname = current_database()"
                " AND pid <> pg_backend_pid()"
            )
            row = await cursor.fetchone()
            longest = max(longest, float(row[0]) if row else 0.0)
            await asyncio.sleep(0.2)
    return longest


async def queries(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-flood-") as scratch:
        data = scratch / "data"
        accounts = harness.create_accounts(data, args.database_url, 1)
        seed_actions(data, args.database_url, args.actions)
        server = harness.start_arbiter(data, args.database_url)
        with harness.running(server):
            username, token = accounts.workers[0]
            probes = {
                "page /tests": page_probe("/tests"),
                "worker request_version": worker_probe(username, token),
            }
            chosen = [WORST_QUERIES[name] for name in args.queries.split(",")]
            alone: dict[str, list[float]] = {name: [] for name in probes}
            beside: dict[str, list[float]] = {name: [] for name in probes}
            outcomes: Counter[str] = Counter()
            slowest, longest = [0.0], 0.0
            phase = args.seconds / args.rounds
            # Alone and beside in turns: a neighbour's load that comes and goes
            # falls on both sides rather than on one phase.
            for _ in range(args.rounds):
                add_samples(alone, await honest_latencies(server, probes, phase))
                stop = asyncio.Event()
                flood = asyncio.create_task(
                    flood_queries(
                        server,
                        chosen,
                        clients=args.clients,
                        stop=stop,
                        outcomes=outcomes,
                        slowest=slowest,
                    )
                )
                sampler = asyncio.create_task(longest_statement(args.database_url, stop))
                await asyncio.sleep(WARM_UP)
                add_samples(beside, await honest_latencies(server, probes, phase))
                stop.set()
                await flood  # its searches end before the next quiet phase
                longest = max(longest, await sampler)
            errors = harness.server_errors(server)
    backend = "PostgreSQL" if args.database_url else "SQLite"
    lines, failed = compare(alone, beside, f"{args.clients} flooding clients")
    answered = ", ".join(f"{count:,} {status}" for status, count in sorted(outcomes.items()))
    lines += [
        "",
        f"- {backend}, {args.actions:,} actions; {args.rounds} rounds of {phase:.0f} s alone,"
        f" then {phase:.0f} s beside the flood (after {WARM_UP:.0f} s of it);"
        f" {sum(map(len, alone.values())):,} honest requests alone,"
        f" {sum(map(len, beside.values())):,} beside.",
        f"- The flood's answers: {answered}; the slowest took {slowest[0]:.1f} s.",
    ]
    if args.database_url:
        lines.append(f"- The longest statement PostgreSQL ran meanwhile: {longest:.2f} s.")
    failed += [f"server error: {line}" for line in errors[:5]]
    return lines, failed


def add_samples(into: dict[str, list[float]], samples: dict[str, list[float]]) -> None:
    for name, values in samples.items():
        into[name].extend(values)


# ---------------------------------------------------------------- idle connections


def hold_idle(port: int, count: int, source: str) -> list[socket.socket]:
    """`count` connections from `source`, each served once and then left idle
    (refused ones, answered 503, are closed)."""
    held = []
    for _ in range(count):
        connection = socket.create_connection(
            ("127.0.0.1", port), timeout=10, source_address=(source, 0)
        )
        connection.sendall(b"GET /api/active_runs HTTP/1.1\r\nhost: arbiter\r\n\r\n")
        if connection.recv(12).endswith(b"200"):
            held.append(connection)
        else:
            connection.close()
    return held


async def idle(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-flood-") as scratch:
        env = {"ARBITER_MAX_CONNECTIONS": str(args.cap)}
        server = harness.start_arbiter(scratch / "data", args.database_url, extra_env=env)
        with harness.running(server):
            held = hold_idle(server.port, args.held, "127.0.0.2")
            outcomes: Counter[int] = Counter()
            transport = httpx.AsyncHTTPTransport(local_address="127.0.0.3")
            async with httpx.AsyncClient(
                base_url=server.url, transport=transport, timeout=30
            ) as client:
                for _ in range(70):
                    reply = await client.get("/api/active_runs", headers={"connection": "close"})
                    outcomes[reply.status_code] += 1
            for connection in held:
                connection.close()
    served = outcomes[200]
    lines = [
        f"- One address (127.0.0.2) asked for {args.held} connections and left them idle; it"
        f" was given {len(held)} (the cap is {args.cap}: its share is the greater of 100 and a"
        " twentieth of the cap, and at the cap the longest-idle connection makes room).",
        f"- Another address (127.0.0.3) then made 70 requests: {served} answered 200"
        f" ({', '.join(f'{n} {status}' for status, n in sorted(outcomes.items()))}).",
    ]
    failed = [] if served == 70 else [f"{70 - served} of 70 honest requests failed"]
    return lines, failed


# ---------------------------------------------------------------- one-byte ranges


def uploader_token(data: Path, database_url: str, source: Path | None) -> str:
    """A token of a new account, made by the `arbiter` of `source` (None: this
    checkout), so that its schema is the one its server expects."""
    env = {**os.environ, **CHEAP_HASHING, "ARBITER_DATABASE_URL": database_url}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    command = [sys.executable, "-m", "arbiter", "users"]
    where = ["--data-dir", str(data)]
    subprocess.run(
        [*command, "create", "uploader", "--password-stdin", *where],
        input=PASSWORD, text=True, env=env, check=True, capture_output=True,
    )  # fmt: skip
    made = subprocess.run(
        [*command, "token", "uploader", *where], text=True, env=env, check=True, capture_output=True
    )
    return made.stdout.strip().splitlines()[-1]


def upload_net(server: Server, token: str) -> str:
    data = random.Random(3).randbytes(NET_BYTES)
    name = f"nn-{hashlib.sha256(data).hexdigest()[:12]}.nnue"
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        client.post(
            f"/api/upload_net?name={name}", content=data, headers=headers
        ).raise_for_status()
    return name


async def flood_ranges(
    server: Server, name: str, clients: int, stop: asyncio.Event, served: list[int]
) -> None:
    generator = random.Random(5)
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:

        async def one() -> None:
            while not stop.is_set():
                at = generator.randrange(NET_BYTES)
                reply = await client.get(f"/api/nn/{name}", headers={"range": f"bytes={at}-{at}"})
                served[0] += reply.status_code == 206

        await asyncio.gather(*(one() for _ in range(clients)))


async def ranges(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    lines: list[str] = []
    trees: list[tuple[str, Path | None]] = [("this checkout", None)]
    with contextlib.ExitStack() as stack:
        if args.against:
            trees.append(
                (args.against, stack.enter_context(harness.source_tree(args.against, "flood-")))
            )
        for label, source in trees:
            alone, beside, served = await ranges_once(args, source)
            # No gate: a flood without pause slows any endpoint; the rate is the figure.
            table, _ = compare(alone, beside, f"{args.clients} range clients")
            rate = served / (args.seconds + WARM_UP)
            lines += [
                f"{label}:",
                "",
                *table,
                "",
                f"- {rate:,.0f} one-byte ranges answered a second.",
                "",
            ]
    lines.append(
        f"- {args.clients} clients asked, without pause, for one byte of a"
        f" {NET_BYTES // 2**20} MiB net at random places."
    )
    return lines, []


async def ranges_once(
    args: argparse.Namespace, source: Path | None
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    with harness.scratch_dir("arbiter-flood-") as scratch:
        data = scratch / "data"
        token = uploader_token(data, args.database_url, source)
        server = harness.start_arbiter(data, args.database_url, source=source)
        with harness.running(server):
            name = upload_net(server, token)
            probes = {"page /tests": page_probe("/tests")}
            alone = await honest_latencies(server, probes, args.seconds)
            stop, served = asyncio.Event(), [0]
            flood = asyncio.create_task(flood_ranges(server, name, args.clients, stop, served))
            await asyncio.sleep(WARM_UP)
            beside = await honest_latencies(server, probes, args.seconds)
            stop.set()
            await flood
    return alone, beside, served[0]


SCENARIOS = {"queries": queries, "idle": idle, "ranges": ranges}
TITLES = {
    "queries": "Flood: the event log's worst queries beside honest traffic",
    "idle": "Flood: one address holding idle connections",
    "ranges": "Flood: one-byte ranges of a net",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--clients", type=int, default=0, help="queries: 100; ranges: 30")
    parser.add_argument("--seconds", type=float, default=30.0, help="s of honest traffic per phase")
    parser.add_argument(
        "--rounds", type=int, default=3, help="queries: alone and beside in this many turns"
    )
    parser.add_argument(
        "--actions", type=int, default=200_000, help="queries: the event log's size"
    )
    parser.add_argument(
        "--held", type=int, default=400, help="idle: connections one address asks for"
    )
    parser.add_argument("--cap", type=int, default=200, help="idle: ARBITER_MAX_CONNECTIONS")
    parser.add_argument("--database-url", default="", help="an empty PostgreSQL database")
    parser.add_argument("--against", help="ranges: a git revision to measure beside this checkout")
    parser.add_argument(
        "--queries", default="or,regex", help="queries: which worst queries (or, regex), in turn"
    )
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args(argv)
    args.clients = args.clients or (100 if args.scenario == "queries" else 30)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # One section of docs/benchmarks.md per scenario and backend.
    backend = "postgresql" if args.database_url else "sqlite"
    named = f"{args.scenario}-{backend}"
    scenarios = {named: SCENARIOS[args.scenario]}
    titles = {named: f"{TITLES[args.scenario]} ({'PostgreSQL' if args.database_url else 'SQLite'})"}
    args.scenario = named
    return harness.run_scenario("flood", scenarios, titles, args)


if __name__ == "__main__":
    sys.exit(main())
