"""Fishtest's whole history, served: every page's server CPU and latency on a
database of Fishtest's size beside the same pages on a 500-run one, in one run.

Run: .venv/bin/python bench/history.py [--runs 250000] [--tasks 10000000]
         [--actions 2500000] [--database-url URL] [--keep DIR] [--reuse DIR] [--write]

A database is built the way an import builds one (storage's bulk writes, then
the derived data: contributor totals, search words), with the shape of
Fishtest's history: 401 users, one of whom owns 8% of the runs; a few dozen
live runs, the rest finished over twelve years (about 5% green, 10% yellow,
20% at a long time control, 3% deleted); tasks per run drawn around the mean,
and one finished run of 5,000 tasks; event-log actions of the usual kinds.
Then a real `arbiter serve` (jobs off) is started on it, pinned to one core,
and each page gets warm-up requests (the first one timed apart: the first
request after start-up) and N timed ones from a logged-in client on the
other core. The server's CPU per request is its /proc utime+stime over the N
requests divided by N; the same pages are then measured on a 500-run
database built alike, in the same run, for the ratio. Start-up is timed from
the process's start to its first answered request.

`--keep DIR` keeps the large database (SQLite file or a dump-free PostgreSQL
database is left as it is) and `--reuse DIR` measures a kept one again.
`--write` replaces the history section of docs/benchmarks.md.
"""

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `tests` and `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2 as httpx

from arbiter.domain.run_args import parse_run_args
from arbiter.domain.runs import chi2_summaries, contribution_totals
from arbiter.domain.runs.documents import build_args, new_run_record
from arbiter.runtime.bootstrap import open_storage, password_hasher
from arbiter.runtime.settings import Settings
from arbiter.storage import Storage, Tx, schema
from arbiter.storage.records import RunRecord, evolve
from arbiter.storage.run_spec import RunSpec
from bench.bench_pages import logged_in_client, start_server
from bench.lib.command import command_line
from bench.lib.fleetsim import worker_info
from bench.lib.harness import cpu_seconds, machine, write_section
from tests.web.live_server import PASSWORD

YEAR = 365.25 * 86400
NOW = 1_790_000_000.0  # the histories end here (late 2026)
USERS = 401
BIG_RUN_TASKS = 5_000
LIVE_RUNS = 40
BATCH = 20_000
WORDS = [
    *("simplify", "bench", "nnue", "search", "eval", "tune", "pawn", "king", "rook"),
    *("bishop", "knight", "queen", "mobility", "history", "lmr", "reduction", "pruning"),
    *("extension", "qsearch", "tt", "move", "ordering", "threat", "endgame", "the", "a"),
    *("of", "and", "to", "in", "fix", "cleanup", "speedup", "refactor", "revert", "test"),
]
RESOLVED = {"resolved_base": "0" * 40, "resolved_new": "1" * 40}
ACTION_KINDS = ("new_run", "approve_run", "finished_run", "update_stats", "crash_or_time")


@dataclass(frozen=True, slots=True)
class Size:
    runs: int
    tasks: int
    actions: int


SMALL = Size(runs=500, tasks=20_000, actions=5_000)
FISHTEST = Size(runs=250_000, tasks=10_000_000, actions=2_500_000)


# ---- building ----


def _templates() -> dict[str, RunSpec]:
    """Validated specs of each kind of run, to copy with other branch names."""
    base: dict[str, object] = {
        "tests_repo": "https://github.com/official-stockfish/Stockfish",
        "new_tag": "patch",
        "base_tag": "master",
        "info": "template",
    }
    kinds = {
        "stc": {**base, "tc": "10+0.1", "sprt": {"elo0": 0, "elo1": 2}},
        "ltc": {**base, "tc": "60+0.6", "sprt": {"elo0": 0.5, "elo1": 2.5}},
        "games": {**base, "tc": "10+0.1", "num_games": 20_000},
    }
    return {
        name: build_args(parse_run_args(raw), username="user0", **RESOLVED)
        for name, raw in kinds.items()
    }


def owner_of(rng: random.Random) -> str:
    return "user0" if rng.random() < 0.08 else f"user{rng.randrange(1, USERS)}"


def run_record(
    rng: random.Random, index: int, size: Size, templates: dict[str, RunSpec]
) -> RunRecord:
    kind = "ltc" if rng.random() < 0.2 else ("games" if rng.random() < 0.1 else "stc")
    owner = owner_of(rng)
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12)))
    branch = f"{rng.choice(WORDS)}-{index}"
    spec = evolve(templates[kind], new_tag=branch, info=f"{words} {branch}", username=owner)
    start = NOW - 12 * YEAR + index * (12 * YEAR / size.runs)
    run_id = f"{int(start):08x}{index:016x}"
    live = index >= size.runs - LIVE_RUNS
    roll = rng.random()
    return evolve(
        new_run_record(run_id, owner, spec, start),
        approved=True,
        approver="user1",
        finished=not live,
        deleted=not live and roll < 0.03,
        is_green=not live and 0.03 <= roll < 0.08,
        is_yellow=not live and 0.08 <= roll < 0.18,
        failed=not live and 0.18 <= roll < 0.19,
        last_updated=start + rng.uniform(3600, 3 * 86400),
    )


TASK_COLUMNS = [column.name for column in schema.tasks.columns]


def _results(rng: random.Random) -> tuple[Any, ...]:
    """One task's results: (pentanomial, as JSON, wins, losses, games)."""
    penta = (rng.randint(0, 3), rng.randint(10, 30), rng.randint(40, 60), rng.randint(10, 30))
    penta += (rng.randint(0, 3),)
    wins, losses = 2 * penta[4] + penta[3], 2 * penta[0] + penta[1]
    return penta, json.dumps(penta), wins, losses, 2 * sum(penta)


RESULTS = [_results(random.Random(index)) for index in range(4096)]  # drawn from at random


def tasks_of(
    rng: random.Random, run: RunRecord, count: int, info_json: str
) -> tuple[RunRecord, list[tuple[Any, ...]]]:
    """The run's tasks as rows of `tasks` (in TASK_COLUMNS order), and the run
    with its totals over them."""
    rows = []
    totals = [0, 0, 0, 0]  # wins, losses, draws, games
    penta_sum = [0, 0, 0, 0, 0]
    for task_id in range(count):
        penta, penta_json, wins, losses, games = RESULTS[rng.getrandbits(12)]
        owner = owner_of(rng)
        key = f"{task_id % 997:04x}"
        values = {
            "run_id": run.id,
            "task_id": task_id,
            "num_games": games,
            "start": task_id * games,
            "active": False,
            "bad": False,
            "last_updated": min(run.last_updated, run.start_time + 60 * (task_id + 1)),
            "username": owner,
            "worker_name": f"{owner}-8cores-{key}",
            "unique_key": f"{key}-1234-5678-9abc-def012345678",
            "remote_addr": "10.0.0.1",
            "worker_info": info_json,
            "wins": wins,
            "losses": losses,
            "draws": games - wins - losses,
            "crashes": 0,
            "time_losses": 0,
            "pentanomial": penta_json,
            "residual": None,
            "spsa_params": None,
        }
        rows.append(tuple(values[name] for name in TASK_COLUMNS))
        for index, value in enumerate((wins, losses, games - wins - losses, games)):
            totals[index] += value
        for index in range(5):
            penta_sum[index] += penta[index]
    spec = run.args
    if not run.finished:  # still short of its games, or start-up would finish it
        spec = evolve(spec, num_games=max(spec.num_games, 2 * totals[3]))
    run = evolve(
        run,
        args=spec,
        wins=totals[0],
        losses=totals[1],
        draws=totals[2],
        pentanomial=tuple(penta_sum),
        committed_games=totals[3],
        total_games=totals[3],
    )
    return run, rows


def insert_rows(tx: Tx, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Rows straight to the driver (COPY on PostgreSQL): building a database of
    Fishtest's size through SQLAlchemy's per-row parameters takes too long."""
    raw = tx.connection.connection.driver_connection
    names = ", ".join(f'"{name}"' for name in columns)
    if tx.connection.dialect.name == "postgresql":
        with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    else:
        marks = ", ".join("?" for _ in columns)
        raw.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)


def task_counts(rng: random.Random, size: Size) -> Iterator[int]:
    """Tasks per run around the mean; the run a tenth of the way in (finished)
    and the last one (live) have BIG_RUN_TASKS."""
    mean = max(1.0, (size.tasks - 2 * BIG_RUN_TASKS) / max(1, size.runs - 2))
    big = {size.runs // 10, size.runs - 1}
    for index in range(size.runs):
        yield BIG_RUN_TASKS if index in big else max(1, int(rng.expovariate(1 / mean)))


CHUNK_RUNS = 500  # runs generated at a time, in a process beside the writer


def generate(
    size: Size, first: int, counts: list[int], seed: int
) -> tuple[list[RunRecord], list[tuple[Any, ...]]]:
    """Runs `first`.. with `counts` tasks each, and their tasks' rows."""
    rng = random.Random(seed * 1_000_003 + first)
    templates, info_json = (
        _templates(),
        json.dumps(worker_info("user1", "0000", random.Random(seed))),
    )
    runs, tasks = [], []
    for index, count in enumerate(counts, start=first):
        run, rows = tasks_of(rng, run_record(rng, index, size, templates), count, info_json)
        runs.append(run)
        tasks += rows
    return runs, tasks


def build(storage: Storage, size: Size, seed: int = 7) -> dict[str, str]:
    """Fill `storage` like an import; returns the ids the pages are measured on.
    One process generates the rows while this one writes them."""
    counts = list(task_counts(random.Random(seed), size))
    chunks = [
        (size, first, counts[first : first + CHUNK_RUNS], seed)
        for first in range(0, size.runs, CHUNK_RUNS)
    ]
    # run_record's ids end in the run's index
    wanted = {f"{size.runs // 10:016x}": "big", f"{size.runs - 1:016x}": "big_live"}
    ids: dict[str, str] = {}
    with multiprocessing.get_context("fork").Pool(1) as pool:
        for runs, tasks in pool.imap(_generate, chunks):
            with storage.write() as tx:
                tx.imports.add_runs(runs)
                insert_rows(tx, "tasks", TASK_COLUMNS, tasks)
            ids.update((wanted[run.id[8:]], run.id) for run in runs if run.id[8:] in wanted)
    add_actions(storage, random.Random(seed), size)
    contribution_totals.rebuild(storage)
    chi2_summaries.score_large_runs(storage)
    return ids


def _generate(chunk: tuple[Size, int, list[int], int]) -> tuple[list[RunRecord], list[Any]]:
    return generate(*chunk)


def add_actions(storage: Storage, rng: random.Random, size: Size) -> None:
    columns = ["time", "action", "username", "message"]
    step = 12 * YEAR / max(1, size.actions)
    rows: list[tuple[Any, ...]] = []
    for index in range(size.actions):
        message = " ".join(rng.choice(WORDS) for _ in range(4))
        rows.append(
            (NOW - 12 * YEAR + index * step, rng.choice(ACTION_KINDS), owner_of(rng), message)
        )
        if len(rows) >= BATCH or index == size.actions - 1:
            with storage.write() as tx:
                insert_rows(tx, "actions", columns, rows)
            rows = []


def add_users(storage: Storage, settings: Settings) -> None:
    """USERS accounts with one password (hashed once: hashing each would take minutes)."""
    password_hash = password_hasher(settings).hash(PASSWORD)
    rows = [
        {
            "username": f"user{index}",
            "username_key": f"user{index}",
            "email": f"user{index}@example.org",
            "password_hash": password_hash,
            "registration_time": NOW - 12 * YEAR,
            "pending": False,
            "blocked": False,
            "is_approver": index == 1,
            "tests_repo": "",
            "machine_limit": 16,
            "credentials_version": 0,
            "worker_proof": None,
        }
        for index in range(USERS)
    ]
    with storage.write() as tx:
        tx.imports.add_users(rows)


# ---- measuring ----


def pages(ids: dict[str, str]) -> list[tuple[str, str]]:
    return [
        ("baseline: /login", "/login"),
        ("home /tests", "/tests"),
        ("finished, first page", "/tests/finished"),
        ("finished, green", "/tests/finished?tab=green"),
        ("finished, yellow", "/tests/finished?tab=yellow"),
        ("finished, LTC", "/tests/finished?tab=ltc"),
        ("finished, user filter", "/tests/finished?user=user7"),
        ("finished, search a branch", "/tests/finished?text=bench-123457"),
        ("finished, search a common word", "/tests/finished?text=simplify"),
        ("finished, search a rare word", "/tests/finished?text=qsearch+threat+rook"),
        ("a user's tests (8% of runs)", "/tests/user/user0"),
        ("contributors", "/contributors"),
        ("contributors, monthly", "/contributors/monthly"),
        ("event log", "/actions"),
        ("event log, one user", "/actions?user=user3"),
        ("event log, one kind", "/actions?action=crash_or_time"),
        ("run page, 5,000 tasks", f"/tests/view/{ids['big']}"),
        (
            "run page, 5,000 tasks by worker, page 50",
            f"/tests/view/{ids['big']}?sort=worker&page=50",
        ),
        ("run page, 5,000 tasks by residual", f"/tests/view/{ids['big']}?sort=residual"),
        ("live run page, 5,000 tasks", f"/tests/view/{ids['big_live']}"),
        ("API: active_runs", "/api/active_runs"),
        ("API: finished_runs", "/api/finished_runs?page=1"),
        ("API: get_run", f"/api/get_run/{ids['big']}"),
        ("API: actions", "POST /api/actions"),
    ]


@dataclass
class Figures:
    first_ms: float
    p50: float
    p95: float
    cpu_ms: float


def fetch(client: httpx.Client, path: str) -> httpx.Response:
    """GET `path`, or POST an empty query for "POST <path>"."""
    if path.startswith("POST "):
        return client.post(path.removeprefix("POST "), json={})
    return client.get(path)


def measure(client: httpx.Client, pid: int, path: str, count: int) -> Figures:
    started = time.perf_counter()
    reply = fetch(client, path)
    first = (time.perf_counter() - started) * 1000
    assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])
    for _ in range(2):
        fetch(client, path)
    times = []
    cpu_before = cpu_seconds(pid)
    for _ in range(count):
        started = time.perf_counter()
        reply = fetch(client, path)
        times.append((time.perf_counter() - started) * 1000)
        assert reply.status_code == 200, path
    cpu = (cpu_seconds(pid) - cpu_before) * 1000 / count
    times.sort()
    return Figures(first, statistics.median(times), times[int(0.95 * (count - 1))], cpu)


def deeper(client: httpx.Client, path: str, steps: int) -> str:
    """The link `steps` pages older than `path`'s (keyset paging: the Older link)."""
    for _ in range(steps):
        text = client.get(path).text
        marker = 'rel="next" href="'
        if marker not in text:
            break
        start = text.index(marker) + len(marker)
        path = text[start : text.index('"', start)].replace("&amp;", "&")
    return path


def serve_and_measure(
    data_dir: Path, database_url: str, ids: dict[str, str], count: int, *, pin: bool = True
) -> tuple[float, dict[str, Figures]]:
    """Start-up seconds and each page's figures; `pin` moves this process to
    the client's core (not in the suite's short run)."""
    started = time.perf_counter()
    server = start_server(data_dir, database_url)
    start_up = time.perf_counter() - started
    try:
        if pin and len(os.sched_getaffinity(0)) > 1:
            os.sched_setaffinity(0, {1})
        client = logged_in_client(server.url, "user0")
        with contextlib.closing(client):
            found = {}
            listed = pages(ids)
            deep = deeper(client, "/tests/finished", 100)
            listed.insert(3, ("finished, 100 pages deep", deep))
            for label, path in listed:
                found[label] = measure(client, server.process.pid, path, count)
                print(f"{label}: {found[label]}", file=sys.stderr, flush=True)
    finally:
        server.process.terminate()
        server.process.wait(30)
    return start_up, found


def prepare(data_dir: Path, database_url: str, size: Size) -> tuple[dict[str, str], float]:
    settings = Settings(
        data_dir=data_dir, database_url=database_url, argon2_time_cost=1, argon2_memory_kib=8
    )
    started = time.perf_counter()
    with open_storage(settings) as storage:
        add_users(storage, settings)
        ids = build(storage, size)
        settle(storage)
    return ids, time.perf_counter() - started


def settle(storage: Storage) -> None:
    """On PostgreSQL, vacuum and analyze what the build wrote, as an operator
    does after a bulk load: left to autovacuum, it would scan the ten million
    new rows on the server's cores while the pages are measured."""
    if storage.engine.dialect.name != "postgresql":
        return
    with storage.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM (ANALYZE)")


def report(
    size: Size,
    backend: str,
    built: float,
    results: dict[str, tuple[float, dict[str, Figures]]],
    count: int,
) -> str:
    small_start, small = results["small"]
    big_start, big = results["big"]
    built_text = f"built in {built / 60:.1f} min" if built else "built by an earlier run (--reuse)"
    lines = [
        f"| page | first ms | p50 ms | p95 ms | CPU ms/request | at {SMALL.runs} runs | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, figures in big.items():
        base = small[label]
        ratio = figures.cpu_ms / base.cpu_ms if base.cpu_ms else float("nan")
        lines.append(
            f"| {label} | {figures.first_ms:.1f} | {figures.p50:.1f} | {figures.p95:.1f} "
            f"| {figures.cpu_ms:.1f} | {base.cpu_ms:.1f} | {ratio:.2f} |"
        )
    lines += [
        "",
        f"Database: {backend}, {size.runs:,} runs, {size.tasks:,} tasks (about), "
        f"{size.actions:,} actions, {USERS} users; {built_text}. Start-up to first answer: "
        f"{big_start:.1f} s ({small_start:.1f} s at {SMALL.runs} runs).",
        f"{count} timed requests per page after 3 warm-up ones (the first timed apart), "
        "one at a time, logged in.",
        f"Machine: {machine()}.",
        f"Command: `{command_line()}`",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=FISHTEST.runs)
    parser.add_argument("--tasks", type=int, default=FISHTEST.tasks)
    parser.add_argument("--actions", type=int, default=FISHTEST.actions)
    parser.add_argument("--database-url", default="", help="PostgreSQL; default SQLite")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--keep", help="build the large database in this directory and keep it")
    parser.add_argument("--reuse", help="measure the large database kept in this directory")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()
    size = Size(options.runs, options.tasks, options.actions)
    backend = "PostgreSQL" if options.database_url else "SQLite"
    results: dict[str, tuple[float, dict[str, Figures]]] = {}
    built = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        small_dir = Path(tmp) / "small"
        small_dir.mkdir()
        small_url = _database_url(options.database_url, "arbiter_history_small", fresh=True)
        small_ids, _ = prepare(small_dir, small_url, SMALL)
        big_dir = Path(options.reuse or options.keep or Path(tmp) / "big")
        big_url = _database_url(
            options.database_url, "arbiter_history_big", fresh=not options.reuse
        )
        if options.reuse:
            ids = _read_ids(big_dir)
        else:
            big_dir.mkdir(parents=True, exist_ok=True)
            ids, built = prepare(big_dir, big_url, size)
            (big_dir / "ids").write_text(json.dumps(ids))
            print(f"built in {built:.0f} s", flush=True)
        results["small"] = serve_and_measure(small_dir, small_url, small_ids, options.requests)
        results["big"] = serve_and_measure(big_dir, big_url, ids, options.requests)
    section = report(size, backend, built, results, options.requests)
    print(section)
    if options.write:
        write_section(
            f"history-{backend.lower()}", f"History at Fishtest's size ({backend})", section
        )


def _read_ids(directory: Path) -> dict[str, str]:
    ids: dict[str, str] = json.loads((directory / "ids").read_text())
    return ids


def _database_url(server_url: str, name: str, *, fresh: bool) -> str:
    """A database of its own on the PostgreSQL server of `server_url` ("" for
    SQLite), made anew when `fresh`."""
    if not server_url:
        return ""
    import psycopg

    plain = server_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as connection:
        if fresh:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}"')
    return plain.rsplit("/", 1)[0] + f"/{name}"


if __name__ == "__main__":
    main()
