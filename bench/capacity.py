"""Capacity benchmarks: idle connections held, and request_task throughput.

Run:
  .venv/bin/python bench/capacity.py idle --connections 19000 [--hold 30] [--write]
  .venv/bin/python bench/capacity.py assign --runs 100 [--seconds 20] [--concurrency 64] [--write]
  .venv/bin/python bench/capacity.py scheduler --runs 100 [--calls 3000] [--write]

idle: open N keep-alive connections to one primary (each makes one real
  request_version), hold them, then prove every one is still served by a second
  request on it. RSS per connection is compared with the raw-ASGI hello server
  holding the same N in the same run.
assign: 100 approved runs, then a closed loop of new machines asking for work
  (a caller told "too busy" pauses 20 ms):
  assignments per second, "too busy" replies, and no task handed out twice.
  The same loop against the hello server gives the ratio's denominator.
scheduler: the same decisions without HTTP: `TaskScheduler.request_task` called
  in this process on a SQLite file, durable commits (as served: each commit's
  WAL fsync'd before the call returns) against a baseline whose commits skip
  the fsync: what the decision and its commit cost, and the fsync's share.
Server pinned to CPU 0, this generator to CPU 1. Exit status 1 when a gate fails.
"""

import argparse
import asyncio
import contextlib
import json
import random
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from unittest import mock

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
from sqlalchemy import Engine

from arbiter.domain.runs.admission import fair_share
from arbiter.domain.runs.service import Runs
from arbiter.protocol.messages import WorkerInfo
from arbiter.runtime.bootstrap import prepare_database
from arbiter.runtime.settings import TASK_SEMAPHORE_SIZE
from arbiter.storage import Storage
from arbiter.storage.durability import WalSync
from arbiter.storage.engine import make_engine, sqlite_url, wal_sync
from bench.lib import harness
from bench.lib.fleetsim import clock, worker_info
from bench.lib.httpclient import Connection, HttpError, Pool, encode_request
from tests.domain.runs.support import approved_run, make_user, worker
from tests.web.live_server import Server

_decode = msgspec.json.Decoder().decode
BATCH = 500  # connections opened at once (the kernel's accept queue is 4096 here)
BUSY_PAUSE = 0.02  # s a caller waits after "too busy" (real workers wait 15 s and more)


# ---------------------------------------------------------------- idle connections


async def hold(server: Server, token: str, count: int, seconds: float) -> dict[str, float]:
    """Open `count` connections, one request each; hold; one more request each."""
    port = harness.port_of(server)
    body = json.dumps({"password": token, "worker_info": {"username": "fleet0"}}).encode()
    request = encode_request("POST", "/api/request_version", body)
    before = harness.rss_kib(server.process.pid)
    connections: list[Connection] = []
    failures = 0

    async def open_one() -> None:
        nonlocal failures
        try:
            connection = await Connection.open("127.0.0.1", port)
            connection.send(request)
            reply = await connection.read_response()
            if reply.status != 200:
                failures += 1
            connections.append(connection)
        except HttpError:
            failures += 1

    for start in range(0, count, BATCH):
        await asyncio.gather(*(open_one() for _ in range(min(BATCH, count - start))))
    held = harness.rss_kib(server.process.pid)
    await asyncio.sleep(seconds)

    async def again(connection: Connection) -> bool:
        try:
            connection.send(request)
            return (await connection.read_response()).status == 200
        except HttpError:
            return False

    alive = 0
    for start in range(0, len(connections), BATCH):
        batch = connections[start : start + BATCH]
        alive += sum(await asyncio.gather(*(again(c) for c in batch)))
    for connection in connections:
        connection.close()
    return {
        "opened": len(connections),
        "failures": failures,
        "alive_after_hold": alive,
        "rss_before_kib": before,
        "rss_held_kib": held,
        "kib_per_connection": (held - before) / max(1, len(connections)),
    }


async def idle(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-idle-") as scratch:
        accounts = harness.create_accounts(scratch / "data", "", 1)
        token = accounts.workers[0][1]
        with harness.running(harness.start_hello(scratch)) as hello:
            base = await hold(hello, token, args.connections, args.hold)
        print(json.dumps({"baseline": base}), flush=True)
        with harness.running(harness.start_arbiter(scratch / "data")) as server:
            mine = await hold(server, token, args.connections, args.hold)
        print(json.dumps({"arbiter": mine}), flush=True)
    ratio = mine["kib_per_connection"] / max(base["kib_per_connection"], 1e-9)
    lines = [
        f"- Connections opened and served: {mine['opened']:.0f} of {args.connections}"
        f" (failures {mine['failures']:.0f}); still served after {args.hold:g} s idle:"
        f" {mine['alive_after_hold']:.0f} (goal >= 19,000).",
        f"- Server RSS {mine['rss_before_kib'] / 1024:.0f} MiB before,"
        f" {mine['rss_held_kib'] / 1024:.0f} MiB holding them:"
        f" {mine['kib_per_connection']:.1f} KiB per connection"
        f" (hello baseline {base['kib_per_connection']:.1f} KiB; ratio {ratio:.2f}, target <= 1.2;"
        " reference: 5.2-6.6 KB per socket for uvicorn + httptools).",
    ]
    failed = [] if mine["alive_after_hold"] >= args.connections else ["connections lost"]
    return lines, failed


# ---------------------------------------------------------------- assignment throughput


async def assign_loop(
    server: Server, tokens: list[tuple[str, str]], args: argparse.Namespace
) -> dict[str, float]:
    """Closed loop: `concurrency` callers, each a new machine per request_task."""
    pool = Pool("127.0.0.1", harness.port_of(server), args.concurrency)
    seen: set[tuple[str, int]] = set()
    counts = {"requests": 0.0, "assignments": 0.0, "too_busy": 0.0, "duplicates": 0.0}
    counts["errors"] = 0.0
    serial = 0
    stop_at = clock() + args.seconds

    async def caller(rng_seed: int) -> None:
        nonlocal serial
        rng = random.Random(rng_seed)
        while clock() < stop_at:
            serial += 1
            # Each caller stays with one account, and there are enough accounts
            # that none has more calls in flight than its share of the gate:
            # this measures assignments, not one account's flood (bench/fairness.py).
            username, token = tokens[rng_seed % len(tokens)]
            info = worker_info(username, f"a{serial:x}"[-8:], rng)
            body = msgspec.json.encode({"password": token, "worker_info": info})
            address = f"10.{serial >> 16 & 255}.{serial >> 8 & 255}.{serial & 255}"
            headers = {"x-forwarded-for": address}
            try:
                response = await pool.request("POST", "/api/request_task", body, headers)
            except HttpError:
                counts["errors"] += 1
                continue
            counts["requests"] += 1
            reply = _decode(response.body)
            if response.status != 200:
                counts["errors"] += 1
            elif "task_id" in reply:
                key = (reply["run"]["_id"], int(reply["task_id"]))
                counts["duplicates"] += key in seen
                seen.add(key)
                counts["assignments"] += 1
            elif "too busy" in str(reply.get("info", "")):
                counts["too_busy"] += 1
                await asyncio.sleep(BUSY_PAUSE)  # a worker backs off; only briefly here

    cpu = harness.cpu_seconds(server.process.pid)
    started = clock()
    await asyncio.gather(*(caller(i) for i in range(args.concurrency)))
    elapsed = clock() - started
    pool.close()
    counts["seconds"] = elapsed
    counts["server_cpu"] = harness.cpu_seconds(server.process.pid) - cpu
    return counts


async def assign(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-assign-") as scratch:
        data = scratch / "data"
        users = max(args.users, -(-args.concurrency // fair_share(TASK_SEMAPHORE_SIZE)))
        accounts = harness.create_accounts(data, args.database_url, users)
        repo = harness.make_repo(scratch / "repo")
        with harness.running(harness.start_hello(scratch)) as hello:
            base = await assign_loop(hello, accounts.workers, args)
        print(json.dumps({"baseline": base}), flush=True)
        with harness.running(harness.start_arbiter(data, args.database_url)) as server:
            harness.submit_runs(server.url, accounts, repo, args.runs)
            mine = await assign_loop(server, accounts.workers, args)
            crashes = harness.server_errors(server)
        print(json.dumps({"arbiter": mine}), flush=True)
    rate, base_rate = mine["assignments"] / mine["seconds"], base["requests"] / base["seconds"]
    busy = mine["too_busy"] / max(1.0, mine["requests"])
    lines = [
        f"- {args.runs} active runs, {args.concurrency} concurrent callers, each call a new"
        f" machine, {args.seconds:g} s ({'PostgreSQL' if args.database_url else 'SQLite'}).",
        f"- Assignments: {rate:.0f}/s (goal >= 2,000/s; reference: one global lock at about"
        f" 15 ms, <= ~66/s); raw-ASGI hello POST rate in the same run {base_rate:.0f}/s,"
        f" ratio {rate / base_rate:.3f} (target >= 0.2).",
        f'- "Too busy" replies: {busy * 100:.1f}% of calls; errors: {mine["errors"]:.0f};'
        f" tasks handed out twice: {mine['duplicates']:.0f}; unhandled server exceptions:"
        f" {len(crashes)}.",
        f"- Server CPU: {mine['server_cpu'] / max(1.0, mine['assignments']) * 1000:.2f} ms per"
        " assignment.",
    ]
    failed = crashes + (["duplicate assignments"] if mine["duplicates"] else [])
    return lines, failed


# ---------------------------------------------------------------- the scheduler alone


def scheduler_calls(scratch: Path, args: argparse.Namespace, *, durable: bool) -> dict[str, float]:
    """Microseconds of wall and CPU time per in-process request_task, and the bytes
    each further task keeps in memory."""
    engine = make_engine(sqlite_url(scratch))
    prepare_database(engine)
    with contextlib.ExitStack() as stack:
        if not durable:  # the baseline: commits reach the OS, never the disk
            stack.enter_context(mock.patch.object(WalSync, "_sync_wal", return_value=None))
        return _scheduler_calls(scratch, engine, args)


def _scheduler_calls(scratch: Path, engine: Engine, args: argparse.Namespace) -> dict[str, float]:
    storage = Storage(engine)
    runs = Runs(storage, task_gate=threading.Semaphore(5))
    owner, approver = make_user(storage, "alice"), make_user(storage, "root", approver=True)
    repo = harness.make_repo(scratch / "repo")
    for _ in range(args.runs):
        approved_run(runs, owner, approver, repo, num_games=3_000_000)
    machines = [worker("alice", key=f"{i:08x}") for i in range(2 * args.calls)]

    def assign(batch: list[WorkerInfo], first: int) -> None:
        for i, machine in enumerate(batch, first):
            reply = runs.scheduler.request_task(machine, owner, f"10.{i >> 8 & 255}.{i & 255}.1")
            assert "task_id" in reply, reply

    sync = wal_sync(engine)
    assert sync is not None
    syncs = sync.syncs
    wall, cpu = time.perf_counter(), time.process_time()
    assign(machines[: args.calls], 0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    syncs = sync.syncs - syncs
    # Then what each further task keeps in memory (record, indexes, lease), untimed.
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    assign(machines[args.calls :], args.calls)
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    with storage.read() as tx:
        tasks = tx.connection.exec_driver_sql(
            "SELECT count(*), count(DISTINCT run_id || '/' || task_id) FROM tasks"
        ).one()
    runs.close()
    engine.dispose()
    per_call = 1e6 / args.calls
    return {
        "wall_us": wall * per_call,
        "cpu_us": cpu * per_call,
        "bytes_per_task": kept / args.calls,
        "syncs_per_call": syncs / args.calls,
        "tasks": tasks[0],
        "distinct_tasks": tasks[1],
    }


async def scheduler(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-scheduler-") as scratch:
        durable = scheduler_calls(scratch / "durable", args, durable=True)
        baseline = scheduler_calls(scratch / "no-fsync", args, durable=False)
    print(json.dumps({"durable": durable, "no_fsync": baseline}), flush=True)
    lines = [
        f"- {args.calls} calls of `TaskScheduler.request_task` one after another (each a"
        f" batch of one on the assignment thread), {args.runs} active runs, each call a new"
        " machine, SQLite file, no HTTP.",
        f"- Durable commits (as served: the WAL fsync'd before the call returns):"
        f" {durable['wall_us']:.0f} us of wall"
        f" time and {durable['cpu_us']:.0f} us of CPU per assignment"
        f" ({1e6 / durable['wall_us']:.0f} assignments/s one at a time).",
        f"- Baseline, the same without the commit's fsync:"
        f" {baseline['wall_us']:.0f} us wall, {baseline['cpu_us']:.0f} us CPU; ratio durable /"
        f" baseline {durable['wall_us'] / baseline['wall_us']:.2f} (wall),"
        f" {durable['cpu_us'] / baseline['cpu_us']:.2f} (CPU).",
        f"- Memory each further task keeps while its run is live (record, indexes, lease;"
        f" tracemalloc over {args.calls} more calls, untimed):"
        f" {durable['bytes_per_task'] / 1024:.2f} KiB.",
    ]
    return lines, []


SCENARIOS = {"idle": idle, "assign": assign, "scheduler": scheduler}
TITLES = {
    "idle": "Idle connections held by one process",
    "assign": "request_task throughput",
    "scheduler": "request_task without HTTP: the scheduler and its commit",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--connections", type=int, default=19_000, help="idle: sockets")
    parser.add_argument("--hold", type=float, default=30.0, help="idle: seconds held")
    parser.add_argument("--runs", type=int, default=100, help="assign: active runs")
    parser.add_argument("--seconds", type=float, default=20.0, help="assign: duration")
    parser.add_argument("--concurrency", type=int, default=16, help="assign: callers")
    parser.add_argument("--calls", type=int, default=3000, help="scheduler: request_task calls")
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--database-url", default="", help="assign: PostgreSQL URL")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return harness.run_scenario("capacity", SCENARIOS, TITLES, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
