"""Password guessing against a real `arbiter serve`: the flood must not take the threadpool.

The server runs with production argon2 costs (OWASP minimum), pinned to one
core; the client runs on the other. Clients appear at distinct addresses
through `X-Forwarded-For`, which uvicorn trusts from loopback as from a local
proxy. Measured:

- how long an unknown name and a wrong password take on the worker API's
  password path (each from a fresh address, so neither is throttled);
- how many guesses at one account from one address argon2 still checks in
  `--guess-seconds`, and how many are answered 429 first;
- a flood: `--flood` concurrent callers sending wrong passwords from random
  addresses, half for alice, half for random unknown names (each costs argon2
  when admitted: a dummy verification for an unknown name), while a
  page (`/login`) and a worker with a token (`/api/request_version`) are
  timed one request at a time; compared with the same timings without it.

    .venv/bin/python bench/passwords.py [--write] [--source DIR]

`--source DIR` serves the arbiter in DIR/src instead (an export of an older
commit: `git archive <commit> | tar -x -C DIR`), to measure the code before a
change on the same machine; its figures are printed, never written.
"""

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arbiter.runtime.bootstrap import make_accounts, open_storage
from arbiter.runtime.settings import Settings
from bench.lib.command import command_line
from bench.lib.httpclient import HttpError, Pool
from tests.web.live_server import PASSWORD, Server, start_server, stop

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- passwords:begin -->", "<!-- passwords:end -->"
WRONG = "not the password at all 0000"
TIMING_PAIRS = 40  # unknown names and wrong passwords timed


Percentiles = dict[str, tuple[float, float]]  # what -> (p50, p95) in ms


@dataclass
class Results:
    quiet: Percentiles
    loaded: Percentiles
    timing: dict[str, float]  # "unknown", "wrong" -> median ms
    guessing: Counter[int]  # one address at one account: status -> replies
    flood: Counter[str]  # status or transport error -> replies
    flood_rate: float  # replies per second


def address(rng: random.Random) -> str:
    return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def version_body(name: str, password: str) -> bytes:
    return json.dumps({"password": password, "worker_info": {"username": name}}).encode()


async def version(pool: Pool, name: str, password: str, client: str) -> tuple[int, float]:
    started = time.perf_counter()
    reply = await pool.request(
        "POST",
        "/api/request_version",
        version_body(name, password),
        {"x-forwarded-for": client},
    )
    return reply.status, (time.perf_counter() - started) * 1000.0


async def page(pool: Pool) -> float:
    started = time.perf_counter()
    reply = await pool.request("GET", "/login")
    assert reply.status == 200, reply.status
    return (time.perf_counter() - started) * 1000.0


def percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


async def timed_pair(pool: Pool, token: str, rng: random.Random, count: int) -> Percentiles:
    """p50/p95 of the page and of a token worker, one request at a time."""
    pages, tokens = [], []
    for _ in range(count):
        pages.append(await page(pool))
        status, took = await version(pool, "alice", token, address(rng))
        assert status == 200, status
        tokens.append(took)
    return {"page": percentiles(pages), "token": percentiles(tokens)}


async def unknown_versus_wrong(pool: Pool, rng: random.Random) -> dict[str, float]:
    times: dict[str, list[float]] = {"unknown": [], "wrong": []}
    for index in range(TIMING_PAIRS):
        # A fresh account and address each time: nothing here is throttled.
        for kind, name in (("unknown", f"nobody{index}"), ("wrong", f"user{index}")):
            status, took = await version(pool, name, WRONG, address(rng))
            assert status == 401, status
            times[kind].append(took)
    return {kind: statistics.median(values) for kind, values in times.items()}


async def one_address_guessing(pool: Pool, seconds: float) -> Counter[int]:
    statuses: Counter[int] = Counter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, _ = await version(pool, "alice", WRONG, "192.0.2.66")
        statuses[status] += 1
    return statuses


async def flood(url: str, callers: int, stop_at: asyncio.Event, statuses: Counter[str]) -> None:
    host, port = urlsplit(url).hostname or "", urlsplit(url).port or 80
    pool = Pool(host, port, callers)
    rng = random.Random(7)

    async def caller() -> None:
        while not stop_at.is_set():
            try:
                name = "alice" if rng.random() < 0.5 else f"x{rng.randrange(10**9)}"
                status, _ = await version(pool, name, WRONG, address(rng))
                statuses[str(status)] += 1
            except HttpError as error:
                statuses[error.kind] += 1

    await asyncio.gather(*(caller() for _ in range(callers)))
    pool.close()


async def measure(server: Server, token: str, options: argparse.Namespace) -> Results:
    parts = urlsplit(server.url)
    pool = Pool(parts.hostname or "", parts.port or 80, 4)
    rng = random.Random(1)
    for _ in range(10):  # warm-up
        await page(pool)
    quiet = await timed_pair(pool, token, rng, options.timed)
    timing = await unknown_versus_wrong(pool, rng)
    guessing = await one_address_guessing(pool, options.guess_seconds)
    flood_statuses: Counter[str] = Counter()
    stop_at = asyncio.Event()
    flooding = asyncio.create_task(flood(server.url, options.flood, stop_at, flood_statuses))
    await asyncio.sleep(2.0)  # the flood at full strength
    started = time.monotonic()
    loaded = await timed_pair(pool, token, rng, options.timed)
    flood_seconds = time.monotonic() - started
    counted_from = sum(flood_statuses.values())
    stop_at.set()
    await flooding
    pool.close()
    rate = counted_from / (flood_seconds + 2.0)
    return Results(quiet, loaded, timing, guessing, flood_statuses, rate)


def report(results: Results, options: argparse.Namespace, command: str) -> str:
    quiet, loaded, timing = results.quiet, results.loaded, results.timing
    guessing, flood_statuses, rate = results.guessing, results.flood, results.flood_rate
    lines = [
        "| request, one at a time | quiet p50 ms | quiet p95 ms "
        "| under the flood p50 ms | under the flood p95 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, label in (("page", "page `/login`"), ("token", "worker with a token")):
        (q50, q95), (l50, l95) = quiet[key], loaded[key]
        lines.append(f"| {label} | {q50:.1f} | {q95:.1f} | {l50:.1f} | {l95:.1f} |")
    answered = ", ".join(f"{count:,} {status}" for status, count in sorted(flood_statuses.items()))
    checked = guessing.get(401, 0)
    lines += [
        "",
        f"Flood: {options.flood} concurrent callers, wrong passwords from random addresses "
        f"(half for alice, half for random unknown names), about {rate:,.0f} answers/s; "
        f"answered: {answered} (401: argon2 checked it; 429: alice must wait; "
        "503: every argon2 slot and waiting place taken).",
        f"Unknown name vs wrong password (worker API, median of {TIMING_PAIRS} each): "
        f"{timing['unknown']:.1f} ms vs {timing['wrong']:.1f} ms.",
        f"One address guessing at one account for {options.guess_seconds:.0f} s: "
        f"{checked} guesses checked by argon2, {guessing.get(429, 0):,} answered 429 "
        "without a check.",
        f"Each latency: {options.timed} requests, a page and a token request in turn.",
        "Server: production argon2 costs (t=2, 19 MiB), defaults for every limit, SQLite.",
        f"Machine: {os.cpu_count()} CPUs (server pinned to one, client on the other), "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()};"
        f" measured on {datetime.date.today().isoformat()}.",
        f"Command: `{command}`",
    ]
    return "\n".join(lines)


def write_doc(section: str) -> None:
    text = DOC.read_text()
    block = f"{BEGIN}\n{section}\n{END}"
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + f"\n\n## Password guessing\n\n{block}\n"
    DOC.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--flood", type=int, default=200, help="concurrent guessing callers")
    parser.add_argument("--guess-seconds", type=float, default=10.0)
    parser.add_argument("--timed", type=int, default=100, help="requests per latency figure")
    parser.add_argument("--source", type=Path, help="serve DIR/src (older code) instead")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        settings = Settings(data_dir=data_dir)  # production argon2 costs
        with open_storage(settings) as storage:
            accounts = make_accounts(storage, settings)
            for name in ["alice"] + [f"user{index}" for index in range(TIMING_PAIRS)]:
                accounts.create_user(name, PASSWORD)
            token = accounts.create_token("alice", "bench")
        cpus = "0" if len(os.sched_getaffinity(0)) > 1 else ""
        # live_server's helper asks for cheap hashing; production costs win here.
        env = {"ARBITER_JOBS": "0", "ARBITER_ARGON2_TIME_COST": "2"}
        env["ARBITER_ARGON2_MEMORY_KIB"] = "19456"
        if options.source:
            env["PYTHONPATH"] = str(options.source.resolve() / "src")
        server = start_server(data_dir, extra_env=env, cpus=cpus)
        try:
            if cpus:
                os.sched_setaffinity(0, {1})
            results = asyncio.run(measure(server, token, options))
        finally:
            stop(server)
    section = report(results, options, command_line())
    print(section)
    if options.write and not options.source:
        write_doc(section)


if __name__ == "__main__":
    main()
