"""Benchmark of /api/actions queries: MongoDB-style queries over
1,000,000 actions, answered from indexes.

Run: .venv/bin/python bench/bench_actions.py [--write] [--actions N] [--repeats N]

Fills a fresh SQLite database (and a fresh PostgreSQL database on the server
of ARBITER_TEST_POSTGRES_URL when it is set) with N actions spread over a
year (one every ~32 s): 300 users, 3,000 runs, 1,500 worker machines, the
reference's action kinds in a plausible mix. Each query then goes through
`Actions.search` (parse, SQL, the rows as the API shows them; no HTTP), a few
warm-up calls and `--repeats` timed ones, one at a time, in-process.
SQLite gets no ANALYZE (Arbiter never runs one); PostgreSQL is analyzed
after the fill, as autovacuum would do on a live server.

Goal: a time-range query answers within 50 ms (p95). `--write` replaces the
actions sections of docs/benchmarks.md.
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from sqlalchemy import Engine, insert, text
from sqlalchemy.engine import make_url

from arbiter.domain.actions import Actions
from arbiter.storage import Storage
from arbiter.storage.engine import make_engine, normalize_url, sqlite_url
from arbiter.storage.migrate import upgrade
from arbiter.storage.schema import actions
from bench.lib.command import command_line
from bench.lib.harness import machine, write_section

GOAL_MS = 50.0
YEAR = 365 * 86400
END = 1_800_000_000.0
START = END - YEAR
USERS, RUNS, WORKERS = 300, 3_000, 1_500
BATCH = 10_000
# The reference's actions in a plausible mix: task failures and dead tasks
# dominate a busy server's log.
KINDS = [
    ("failed_task", 30),
    ("dead_task", 25),
    ("crash_or_time", 5),
    ("worker_log", 10),
    ("new_run", 6),
    ("approve_run", 6),
    ("finished_run", 6),
    ("stop_run", 4),
    ("modify_run", 3),
    ("purge_run", 1),
    ("log_message", 3),
    ("block_worker", 1),
]
RUN_KINDS = {"failed_task", "dead_task", "crash_or_time", "worker_log", "new_run"}
RUN_KINDS |= {"approve_run", "finished_run", "stop_run", "modify_run", "purge_run"}
TASK_KINDS = {"failed_task", "dead_task", "crash_or_time", "worker_log"}


def rows(count: int, seed: int = 13) -> Iterator[list[dict[str, Any]]]:
    """`count` actions oldest first, in batches, with every column filled as the
    domain fills it for that kind."""
    rng = random.Random(seed)
    names, weights = zip(*KINDS, strict=True)
    step = YEAR / count
    batch: list[dict[str, Any]] = []
    for index in range(count):
        kind = rng.choices(names, weights)[0]
        run = rng.randrange(RUNS)
        worker = rng.randrange(WORKERS)
        row: dict[str, Any] = {
            "time": START + index * step + rng.random() * step,
            "action": kind,
            "username": f"user{rng.randrange(USERS)}",
            "message": _message(rng, kind),
            "run_id": f"{run:024x}" if kind in RUN_KINDS else None,
            "run": f"patch-{run}-{run:07x}" if kind in RUN_KINDS else None,
            "task_id": rng.randrange(400) if kind in TASK_KINDS else None,
            "worker": f"user{worker % USERS}-8cores-{worker:04x}" if kind in TASK_KINDS else None,
            "user": None,
            "data": None,
        }
        batch.append(row)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _message(rng: random.Random, kind: str) -> str:
    if kind == "finished_run":
        verdict = rng.choice(["accepted", "rejected"])
        return f"Result:{verdict} Elo:{rng.uniform(-3, 3):.2f}[-1.00,1.00] LOS:50% Games:40000"
    if kind in ("failed_task", "crash_or_time"):
        return rng.choice(["Finished match uncleanly", "Engine crashed", "Time loss"])
    return "" if kind == "dead_task" else f"note {rng.randrange(1000)}"


def fill(engine: Engine, count: int) -> float:
    started = time.monotonic()
    with engine.begin() as connection:
        for batch in rows(count):
            connection.execute(insert(actions), batch)
    if engine.dialect.name == "postgresql":
        with engine.begin() as connection:
            connection.execute(text("ANALYZE actions"))
    return time.monotonic() - started


def queries() -> list[tuple[str, dict[str, Any], bool]]:
    """(label, query, has the time-range goal)."""
    hour_ago, day = END - 3600, 86400
    middle = START + YEAR / 2
    return [
        ("time range: the last hour", {"time": {"$gte": hour_ago}}, True),
        ("time range: one day, mid-year", {"time": {"$gte": middle, "$lt": middle + day}}, True),
        ("time range: one week, mid-year", {
            "time": {"$gt": middle, "$lte": middle + 7 * day}
        }, True),
        ("username + action", {"username": "user17", "action": "finished_run"}, False),
        ("username + action, last 30 days", {
            "username": "user17", "action": "failed_task", "time": {"$gte": END - 30 * day}
        }, False),
        ("run_id", {"run_id": f"{1234:024x}"}, False),
        ("worker", {"worker": f"user{42 % USERS}-8cores-{42:04x}"}, False),
        ("$in actions in the last day", {
            "action": {"$in": ["new_run", "finished_run"]}, "time": {"$gte": END - day}
        }, False),
        ("$or of two users, last week", {
            "$or": [{"username": "user1"}, {"username": "user2"}], "time": {"$gte": END - 7 * day}
        }, False),
        ("$regex on messages of the last day", {
            "time": {"$gte": END - day}, "message": {"$regex": "^Result:accepted"}
        }, False),
        ("everything (the 200 oldest)", {}, False),
    ]  # fmt: skip


def measure(storage: Storage, repeats: int) -> list[tuple[str, int, list[float], bool]]:
    log = Actions(storage)
    results = []
    for label, query, goal in queries():
        for _ in range(3):
            found = log.search(query)
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            log.search(query)
            timings.append((time.perf_counter() - started) * 1000)
        results.append((label, len(found), timings, goal))
    return results


def render(results: list[tuple[str, int, list[float], bool]]) -> str:
    lines = [
        "| query | actions returned | p50 ms | p95 ms | max ms | goal (p95) | met |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for label, returned, timings, goal in results:
        ordered = sorted(timings)
        p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
        goal_text = f"<= {GOAL_MS:g} ms" if goal else "-"
        met = ("yes" if p95 <= GOAL_MS else "no") if goal else "-"
        lines.append(
            f"| {label} | {returned} | {statistics.median(ordered):.1f} | {p95:.1f} |"
            f" {ordered[-1]:.1f} | {goal_text} | {met} |"
        )
    return "\n".join(lines)


@contextmanager
def sqlite_engine() -> Iterator[Engine]:
    with tempfile.TemporaryDirectory(prefix="arbiter-bench-actions-") as directory:
        engine = make_engine(sqlite_url(Path(directory)))
        yield engine
        engine.dispose()


@contextmanager
def postgres_engine(admin_url: str) -> Iterator[Engine]:
    name = f"arbiter_bench_actions_{uuid.uuid4().hex[:8]}"
    libpq = make_url(normalize_url(admin_url)).set(drivername="postgresql")
    admin = libpq.render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    engine = make_engine(str(make_url(normalize_url(admin_url)).set(database=name)))
    try:
        yield engine
    finally:
        engine.dispose()
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_backend(backend: str, engine: Engine, args: argparse.Namespace) -> tuple[str, bool]:
    upgrade(engine)
    seconds = fill(engine, args.actions)
    results = measure(Storage(engine), args.repeats)
    table = render(results)
    command = command_line()
    body = "\n".join(
        [
            table,
            "",
            f"Database: {backend}, {args.actions:,} actions over a year (filled in"
            f" {seconds:.0f} s); {args.repeats} sequential `Actions.search` calls per query"
            " after 3 warm-up ones, in-process (no HTTP).",
            f"Machine: {machine(pinned=False)}.",
            f"Command: `{command}`",
        ]
    )
    print(f"== {backend}\n{body}\n")
    met = all(
        sorted(t)[max(0, round(0.95 * len(t)) - 1)] <= GOAL_MS for _, _, t, goal in results if goal
    )
    return body, met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--actions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    backends: list[tuple[str, Any]] = [("sqlite", sqlite_engine())]
    admin = os.environ.get("ARBITER_TEST_POSTGRES_URL")
    if admin:
        backends.append(("postgresql", postgres_engine(admin)))
    all_met = True
    for backend, opened in backends:
        with opened as engine:
            body, met = run_backend(backend, engine, args)
        all_met = all_met and met
        if args.write:
            write_section(f"actions-{backend}", f"Audit log queries: {backend}", body)
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
