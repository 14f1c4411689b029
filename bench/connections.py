"""Connection-limit benchmarks: endless headers and trickling clients.

Run:
  .venv/bin/python bench/connections.py endless-headers [--clients 100] [--seconds 30] [--write]
  .venv/bin/python bench/connections.py trickle [--clients 2000] [--workers 2000]
      [--duration 60] [--ramp 20] [--write]
  .venv/bin/python bench/connections.py overhead [--seconds 15] [--rounds 2] [--write]

endless-headers: N clients each send a request head that never ends, as fast
  as the server reads, reconnecting whenever it answers or closes; the
  primary's RSS is sampled every second (goal: bounded, whatever they send),
  and an honest request_version is timed beside them every second.
trickle: a fleet at cadence x4 plays against a primary three times: alone,
  beside N clients that trickle (half send their head one line a second, half
  a complete head and then a body one byte a second, reconnecting whenever
  closed; they first connect over 10 s, from a process of their own), and
  alone again; the workers' p99 per endpoint beside the tricklers must stay
  under twice the mean alone.
overhead: the raw-ASGI hello app served by uvicorn's httptools protocol and by
  ours, in alternate rounds: server CPU per reply and replies per second.
Server pinned to CPU 0, this generator to CPU 1; default limits throughout.
Exit status 1 when a gate fails.
"""

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import uvloop

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fleet import Options, fleet_config, p99_beside_table, run_phase
from bench.lib import harness
from bench.lib.fleetsim import clock, percentile
from bench.lib.httpclient import Connection, HttpError, Pool
from tests.web.live_server import Server, free_port, wait_until_serving

ROOT = harness.ROOT

ENDLESS_GROWTH_GOAL_MIB = 128
HEAD = b"POST /api/beat HTTP/1.1\r\nhost: 127.0.0.1\r\n"
OPENING = 10.0  # s over which the tricklers first connect
TRICKLING = {
    "mixed": "half the head a line a second, half a body a byte a second",
    "head": "the head a line a second",
    "body": "a body a byte a second",
}


# ---------------------------------------------------------------- endless headers


async def endless_client(port: int, stop_at: float, counts: Counter[str]) -> None:
    """A head that never ends, sent as fast as the server takes it; again when closed."""
    filler = b"a" * 16384
    while clock() < stop_at:
        try:
            connection = await Connection.open("127.0.0.1", port)
        except HttpError:
            counts["refused"] += 1
            await asyncio.sleep(0.1)
            continue
        counts["connections"] += 1
        reply = asyncio.ensure_future(connection.reader.read(4096))
        try:
            connection.send(HEAD + b"x-endless: ")
            while clock() < stop_at and not reply.done():
                connection.send(filler)
                counts["bytes sent"] += len(filler)
                # The server stops reading once it answers: wait for the reply
                # or for room to send, whichever comes first.
                drained = asyncio.ensure_future(connection.writer.drain())
                await asyncio.wait([drained, reply], return_when=asyncio.FIRST_COMPLETED)
                drained.cancel()
            head = await asyncio.wait_for(reply, 3.0)
            status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "none"
            counts[f"answered {status}"] += 1
        except (ConnectionError, TimeoutError):
            counts["reset or timed out"] += 1
        finally:
            reply.cancel()
            connection.close()


async def honest_probe(port: int, stop_at: float, latencies: list[float]) -> None:
    """One request_version a second on a fresh pool: the server still serves."""
    pool = Pool("127.0.0.1", port, 1)
    body = json.dumps({"password": "x", "worker_info": {"username": "nobody"}}).encode()
    while clock() < stop_at:
        started = clock()
        with contextlib.suppress(HttpError):
            await pool.request("POST", "/api/request_version", body)
            latencies.append(clock() - started)
        await asyncio.sleep(1.0)
    pool.close()


async def endless_headers(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with (
        harness.scratch_dir("arbiter-endless-") as scratch,
        harness.running(harness.start_arbiter(scratch / "data")) as server,
    ):
        pid, port = server.process.pid, harness.port_of(server)
        before = harness.rss_kib(pid)
        counts: Counter[str] = Counter()
        latencies: list[float] = []
        stop_at = clock() + args.seconds
        tasks = [endless_client(port, stop_at, counts) for _ in range(args.clients)]
        running = asyncio.gather(*tasks, honest_probe(port, stop_at, latencies))
        series = []
        while clock() < stop_at:
            await asyncio.sleep(1.0)
            series.append(harness.rss_kib(pid))
        await running
        after = harness.rss_kib(pid)
        crashes = harness.server_errors(server)
    peak = max(series)
    growth_mib = (peak - before) / 1024
    second_half = series[len(series) // 2 :]
    lines = [
        f"- {args.clients} clients sending request heads that never end, {args.seconds:g} s,"
        f" default limits (32 KiB of head): {counts['bytes sent'] / 2**20:.0f} MiB sent over"
        f" {counts['connections']} connections; replies: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()) if k.startswith("answered"))
        + f"; resets or timeouts: {counts['reset or timed out']}; refused: {counts['refused']}.",
        f"- Server RSS: {before / 1024:.0f} MiB before, peak {peak / 1024:.0f} MiB"
        f" (+{growth_mib:.0f} MiB; goal: bounded, under +{ENDLESS_GROWTH_GOAL_MIB} MiB),"
        f" {min(second_half) / 1024:.0f}-{max(second_half) / 1024:.0f} MiB over the second"
        f" half, {after / 1024:.0f} MiB after. Before the limits, 4 such clients grew the"
        " server by 1.5 GB in 4 s.",
        f"- An honest request_version once a second beside them: {len(latencies)} answered,"
        f" median {percentile(latencies, 50) * 1000:.1f} ms, max"
        f" {max(latencies, default=0) * 1000:.1f} ms; unhandled server exceptions:"
        f" {len(crashes)}.",
    ]
    failed = crashes + (
        ["memory grew past the goal"] if growth_mib >= ENDLESS_GROWTH_GOAL_MIB else []
    )
    return lines, failed


# ---------------------------------------------------------------- trickling clients


async def trickle_client(
    port: int, stop_at: float, body: bool, counts: Counter[str], delay: float
) -> None:
    """A head one line a second, or a whole head and then its body a byte a second;
    first connecting after `delay` (slowloris tools open their connections
    over a few seconds, not in one instant)."""
    await asyncio.sleep(delay)
    while clock() < stop_at:
        try:
            connection = await Connection.open("127.0.0.1", port)
        except HttpError:
            counts["refused"] += 1
            await asyncio.sleep(1.0)
            continue
        counts["connections"] += 1
        opened = clock()
        try:
            if body:
                connection.send(HEAD + b"content-length: 100000\r\n\r\n")
            else:
                connection.send(HEAD)
            while clock() < stop_at and not connection.reader.at_eof():
                await asyncio.sleep(1.0)
                connection.send(b"{" if body else b"x-slow: aaaaaaaaaaaaaaaaaaaa\r\n")
                await connection.writer.drain()
            if connection.reader.at_eof():
                counts["closed by server"] += 1
                counts["seconds held before closed"] += round(clock() - opened)
        except (ConnectionError, RuntimeError):  # RuntimeError: writing after a reset
            counts["closed by server"] += 1
            counts["seconds held before closed"] += round(clock() - opened)
        finally:
            connection.close()


async def tricklers(args: argparse.Namespace) -> None:
    """The tricklers alone, in a process of their own (started by `trickle`):
    prints their counts as one JSON line when they are done."""
    stop_at = clock() + OPENING + args.seconds
    counts: Counter[str] = Counter()
    await asyncio.gather(
        *(
            trickle_client(
                args.port,
                stop_at,
                sends_body(args.kind, index),
                counts,
                index / args.clients * OPENING,
            )
            for index in range(args.clients)
        )
    )
    print(json.dumps(counts), flush=True)


def start_tricklers(port: int, args: argparse.Namespace, seconds: float) -> subprocess.Popen[str]:
    """The tricklers in a process of their own on the generator's core: in the
    fleet's event loop their reconnections would delay the fleet's own sends and
    reads, and be counted as the server's latency."""
    command = [sys.executable, str(Path(__file__).resolve()), "tricklers"]
    command += ["--port", str(port), "--clients", str(args.clients), "--kind", args.kind]
    command += ["--seconds", str(seconds)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


async def trickle(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    options = Options(args.workers, args.duration, 4.0, args.ramp, args.workers, chaos=False)
    with harness.scratch_dir("arbiter-trickle-") as scratch:
        data = scratch / "data"
        accounts = harness.create_accounts(data, "", 4)
        repo = harness.make_repo(scratch / "repo")
        with harness.running(harness.start_arbiter(data)) as server:
            harness.submit_runs(server.url, accounts, repo, 10)
            pid, port = server.process.pid, harness.port_of(server)
            config = fleet_config(options, accounts, strict=True)
            alone, _ = await run_phase("alone", pid, port, config, options)
            children = start_tricklers(port, args, args.duration + 2.0)
            await asyncio.sleep(OPENING)
            config.generation = 1  # new machine names: the first fleet's tasks stay theirs
            beside, _ = await run_phase("beside tricklers", pid, port, config, options)
            output, _ = await asyncio.to_thread(children.communicate)
            counts: Counter[str] = Counter(json.loads(output.strip().splitlines()[-1]))
            config.generation = 2
            again, _ = await run_phase("alone again", pid, port, config, options)
            log = server.output()
    crashes, disconnects = unhandled_errors(log)
    lines, worst = p99_beside_table(alone, beside, again, "beside tricklers")
    closed = max(1, counts["closed by server"])
    lines += [
        "",
        f"- {args.workers} workers at cadence x4, {args.duration:g} s per phase"
        f" (ramp {args.ramp:g} s); {args.clients} trickling clients ({TRICKLING[args.kind]};"
        " default limits: head 20 s, body 30 s at"
        f" 16 KiB/s): {counts['connections']} connections, {counts['closed by server']}"
        f" closed by the server after {counts['seconds held before closed'] / closed:.0f} s on"
        f" average, refused {counts['refused']}.",
        "- Load generator (the fleet's process) per phase: "
        + "; ".join(
            f"{phase.name} {phase.client_cpu / phase.window * 100:.0f}% of its core,"
            f" {phase.late_sends} sends over 10 ms late"
            for phase in (alone, beside, again)
        )
        + " (the tricklers run in a process of their own on the same core).",
        f"- Errors alone: {alone.errors or 'none'}; beside: {beside.errors or 'none'};"
        f" alone again: {again.errors or 'none'}; unhandled server exceptions:"
        f" {len(crashes)} (bodies cut short logged {disconnects} ClientDisconnect tracebacks).",
    ]
    failed = crashes + (["p99 doubled"] if worst >= 2.0 else [])
    return lines, failed


def sends_body(kind: str, index: int) -> bool:
    """Which tricklers send a body: every other one (mixed), none (head) or all."""
    return kind == "body" or (kind == "mixed" and index % 2 == 1)


def unhandled_errors(log: str) -> tuple[list[str], int]:
    """The server's unhandled errors, but for starlette's ClientDisconnect (a body
    cut short, logged with a traceback until such errors were quieted),
    which are only counted."""
    lines = log.splitlines()
    crashes, disconnects = [], 0
    for index, line in enumerate(lines):
        if "unhandled error" not in line:
            continue
        following = lines[index + 1 : index + 200]
        ending = next(
            (x for x in following if x and not x[0].isspace() and not x.startswith("Traceback")),
            "",
        )
        if "ClientDisconnect" in ending:
            disconnects += 1
        else:
            crashes.append(f"{line} -> {ending}")
    return crashes, disconnects


# ---------------------------------------------------------------- per-request cost


def start_hello(log_dir: Path, *, stock: bool) -> Server:
    """The raw-ASGI hello app on the server core, with or without our protocol."""
    port = free_port()
    args = [
        "taskset",
        "-c",
        harness.SERVER_CPU,
        sys.executable,
        str(ROOT / "bench" / "lib" / "hello_app.py"),
    ]
    args += ["--port", str(port), *(["--stock-httptools"] if stock else [])]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    log = log_dir / f"hello-{port}.log"
    with log.open("w") as sink:
        process = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env)
    server = Server(process, f"http://127.0.0.1:{port}", log)
    wait_until_serving(server)
    return server


async def closed_loop(server: Server, connections: int, seconds: float) -> tuple[float, float]:
    """`connections` keep-alive clients, each one beat after another: (replies/s,
    server CPU ms per 1,000 replies)."""
    pool = Pool("127.0.0.1", harness.port_of(server), connections)
    body = json.dumps({"password": "x", "run_id": "0" * 24, "task_id": 0}).encode()
    replies = 0
    stop_at = clock() + seconds

    async def client() -> None:
        nonlocal replies
        while clock() < stop_at:
            await pool.request("POST", "/api/beat", body)
            replies += 1

    cpu, started = harness.cpu_seconds(server.process.pid), clock()
    await asyncio.gather(*(client() for _ in range(connections)))
    elapsed, cpu = clock() - started, harness.cpu_seconds(server.process.pid) - cpu
    pool.close()
    return replies / elapsed, cpu / max(1, replies) * 1e6


async def overhead(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    with harness.scratch_dir("arbiter-overhead-") as scratch:
        for _ in range(args.rounds):  # alternated, so a busy neighbour hurts both
            for stock in (True, False):
                with harness.running(start_hello(scratch, stock=stock)) as hello:
                    results[stock].append(await closed_loop(hello, 50, args.seconds))
    print(json.dumps({"stock": results[True], "limited": results[False]}), flush=True)

    def median(stock: bool) -> tuple[float, float]:
        rates, cpus = zip(*results[stock], strict=True)
        return statistics.median(rates), statistics.median(cpus)

    (stock_rate, stock_cpu), (mine_rate, mine_cpu) = median(True), median(False)
    lines = [
        f"- The raw-ASGI hello app, 50 keep-alive clients each sending beats one after"
        f" another, {args.seconds:g} s a round, {args.rounds} rounds alternating uvicorn's"
        " httptools protocol and ours (median round of each).",
        f"- uvicorn's protocol: {stock_rate:.0f} replies/s, {stock_cpu:.0f} us of server CPU"
        f" a reply; with the connection limits: {mine_rate:.0f} replies/s, {mine_cpu:.0f} us"
        f" ({(mine_cpu / stock_cpu - 1) * 100:+.1f}% CPU a reply).",
    ]
    return lines, []


SCENARIOS = {"endless-headers": endless_headers, "trickle": trickle, "overhead": overhead}
TITLES = {
    "endless-headers": "Connection limits: endless request heads",
    "trickle": "Connection limits: trickling clients beside a fleet",
    "overhead": "Connection limits: their cost per request",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=[*sorted(SCENARIOS), "tricklers"])
    parser.add_argument("--clients", type=int, default=100, help="abusive clients")
    parser.add_argument("--seconds", type=float, default=30.0, help="endless-headers, overhead: s")
    parser.add_argument("--workers", type=int, default=2000, help="trickle: fleet size")
    parser.add_argument("--duration", type=float, default=60.0, help="trickle: s per phase")
    parser.add_argument("--ramp", type=float, default=20.0, help="trickle: fleet ramp")
    parser.add_argument(
        "--kind", choices=["mixed", "head", "body"], default="mixed", help="trickle: what trickles"
    )
    parser.add_argument("--rounds", type=int, default=2, help="overhead: rounds of each")
    parser.add_argument("--port", type=int, default=0, help="tricklers: the server's port")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.scenario == "tricklers":  # the child process of `trickle`
        harness.pin_self_to_client_core()
        uvloop.run(tricklers(args))
        return 0
    return harness.run_scenario("connections", SCENARIOS, TITLES, args)


if __name__ == "__main__":
    sys.exit(main())
