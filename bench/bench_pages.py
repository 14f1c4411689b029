"""Benchmark of the dashboard pages: home and run page latency with
500 runs and 10,000 tasks in the database, against a baseline page measured
in the same run.

Run: .venv/bin/python bench/bench_pages.py [--write] [--database-url URL] [--requests N]

A real `arbiter serve` process (SQLite by default) is started on a database
filled directly through storage: 500 runs (40 live, 460 finished; SPRT, fixed
games and SPSA, each with a results history) and 10,000 tasks, 1,000 of them
in the one run whose page is measured (so its tasks table pages). The client
is a logged-in user (the heavier path: session lookup, `no-store`), making one
request at a time; the server is pinned to one core and the client to the
other when there are two. Each page gets a warm-up, then N timed requests.

The baseline is `/login`: a small template through the same middleware, the
session lookup and the threadpool, with no run data. Ratios to it are what to
compare across machines. `--write` replaces the section between the pages
markers in docs/benchmarks.md.
"""

import argparse
import datetime
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2 as httpx

from arbiter.domain.run_args import parse_run_args
from arbiter.domain.runs import history
from arbiter.domain.runs.documents import build_args, new_run_record
from arbiter.domain.runs.totals import apply_change
from arbiter.runtime.bootstrap import make_accounts, open_storage
from arbiter.runtime.settings import Settings
from arbiter.storage import Storage
from arbiter.storage.records import RunRecord, TaskRecord, evolve
from bench.lib.command import command_line
from tests.web.live_server import CHEAP_HASHING, PASSWORD, free_port, wait_until_serving
from tests.web.live_server import Server as LiveServer

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
MARKERS = "<!-- pages-{}:begin -->", "<!-- pages-{}:end -->"  # one section per backend
RUNS, TASKS, LIVE_RUNS, BIG_RUN_TASKS = 500, 10_000, 40, 1_000
GOAL_MS = 150.0
T0 = time.time() - 20 * 86400


def run_args(rng: random.Random, kind: str) -> dict[str, Any]:
    raw: dict[str, object] = {
        "tests_repo": "https://example.org/engine.git",
        "new_tag": f"patch-{rng.randrange(10**6)}",
        "base_tag": "master",
        "tc": rng.choice(["10+0.1", "60+0.6"]),
        "info": "A benchmark run " * 5,
    }
    if kind == "sprt":
        raw["sprt"] = {"elo0": 0, "elo1": 2}
    elif kind == "spsa":
        raw["num_games"] = 40_000
        params = "\n".join(f"P{i},{50 + i},0,200,5,0.002" for i in range(8))
        raw["spsa"] = {"raw_params": params}
    else:
        raw["num_games"] = 20_000
    return build_args(
        parse_run_args(raw), username="alice", resolved_base="0" * 40, resolved_new="1" * 40
    )


def with_tasks(run: RunRecord, tasks: list[TaskRecord]) -> RunRecord:
    """The run's aggregates from its tasks (as restore() checks them), with a
    results history recorded as the tasks came in (about 64 steps)."""
    step = max(1, len(tasks) // 64)
    for index, one in enumerate(tasks, start=1):
        run = apply_change(run, None, one)
        if index % step == 0 or index == len(tasks):
            if run.args.sprt is not None:
                games = max(1.0, (run.wins + run.losses + run.draws) ** 0.5)
                sprt = {**run.args.sprt, "llr": (run.wins - run.losses) / games}
                run = evolve(run, args=evolve(run.args, sprt=sprt))
            run = history.record(run)
    return run


def task(run: RunRecord, task_id: int, rng: random.Random, active: bool) -> TaskRecord:
    key = f"w{task_id % 97:03d}"
    info = {
        "uname": "Linux 6.1",
        "architecture": ["64bit", "ELF"],
        "concurrency": 8,
        "max_memory": 16000,
        "min_threads": 1,
        "username": "alice",
        "version": 325,
        "python_version": [3, 11, 7],
        "gcc_version": [12, 2, 0],
        "compiler": "g++",
        "unique_key": f"{key}-1234-5678-9abc-def012345678",
        "modified": False,
        "worker_arch": "x86-64-bmi2",
        "nps": 900_000.0,
    }
    penta = [rng.randint(0, 3), rng.randint(10, 30), rng.randint(40, 60), rng.randint(10, 30)]
    penta.append(rng.randint(0, 3))
    wins, losses = 2 * penta[4] + penta[3], 2 * penta[0] + penta[1]
    return TaskRecord(
        run_id=run.id,
        task_id=task_id,
        num_games=2 * sum(penta) + (200 if active else 0),
        start=task_id * 400,
        active=active,
        bad=False,
        last_updated=run.start_time + 60 * task_id,
        username="alice",
        worker_name=f"alice-8cores-{key}",
        unique_key=info["unique_key"],
        remote_addr="10.0.0.1",
        worker_info=info,
        wins=wins,
        losses=losses,
        draws=2 * sum(penta) - wins - losses,
        crashes=0,
        time_losses=0,
        pentanomial=tuple(penta),
        residual=None,
        spsa_params=None,
    )


def fill(storage: Storage) -> str:
    """500 runs and 10,000 tasks; returns the id of the big live SPRT run."""
    rng = random.Random(5)
    kinds = ["sprt", "games", "spsa"]
    per_run = (TASKS - BIG_RUN_TASKS) // (RUNS - 1)
    with storage.write() as tx:
        for index in range(RUNS):
            kind = "sprt" if index == 0 else kinds[index % 3]
            start = T0 + 600 * index
            run_id = f"{int(start):08x}{index:016x}"
            run = new_run_record(run_id, "alice", run_args(rng, kind), start)
            live = index < LIVE_RUNS
            count = BIG_RUN_TASKS if index == 0 else per_run
            tasks = [task(run, n, rng, active=live and n >= count - 3) for n in range(count)]
            run = evolve(
                with_tasks(run, tasks),
                approved=index % 4 != 3 or not live,
                approver="root",
                finished=not live,
                is_green=not live and index % 5 == 0,
                last_updated=start + 3600,
            )
            tx.runs.add(run)
            for one in tasks:
                tx.tasks.add(one)
            if index == 0:
                measured = run.id
    return measured


def start_server(data_dir: Path, database_url: str) -> LiveServer:
    port = free_port()
    env = {**os.environ, **CHEAP_HASHING, "ARBITER_JOBS": "0"}
    pin = ["taskset", "-c", "0"] if len(os.sched_getaffinity(0)) > 1 else []
    args = [*pin, sys.executable, "-m", "arbiter", "serve", "--port", str(port)]
    args += ["--data-dir", str(data_dir)]
    if database_url:
        args += ["--database-url", database_url]
    log = data_dir.parent / "server.log"
    with log.open("w") as sink:
        process = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, env=env, text=True)
    server = LiveServer(process, f"http://127.0.0.1:{port}", log)
    wait_until_serving(server, timeout=120.0)
    return server


def logged_in_client(url: str, username: str = "alice") -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30.0)
    page = client.get("/login").text
    marker = 'name="csrf_token" value="'
    start = page.index(marker) + len(marker)
    token = page[start : page.index('"', start)]
    form = {"username": username, "password": PASSWORD, "csrf_token": token}
    reply = client.post("/login", data=form)
    assert reply.status_code in (200, 303), reply.text
    return client


def measure(client: httpx.Client, path: str, count: int) -> dict[str, float]:
    for _ in range(10):
        assert client.get(path).status_code == 200, path
    times = []
    for _ in range(count):
        started = time.perf_counter()
        reply = client.get(path)
        times.append((time.perf_counter() - started) * 1000.0)
        assert reply.status_code == 200, path
    times.sort()
    return {
        "p50": statistics.median(times),
        "p95": times[int(0.95 * (len(times) - 1))],
        "max": times[-1],
    }


def report(results: dict[str, dict[str, float]], backend: str, requests: int, command: str) -> str:
    base = results["baseline"]["p95"]
    lines = [
        "| page | p50 ms | p95 ms | max ms | p95 / baseline p95 | goal (p95) | met |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for name, label in (
        ("baseline", "baseline: `/login`"),
        ("home", "home `/tests`"),
        ("run", "run page `/tests/view/<id>` (1,000 tasks)"),
        ("run_live", "run page live fragment (`?live=1`)"),
    ):
        figures = results[name]
        goal = "-" if name == "baseline" else f"<= {GOAL_MS:.0f} ms"
        met = "-" if name == "baseline" else ("yes" if figures["p95"] <= GOAL_MS else "no")
        lines.append(
            f"| {label} | {figures['p50']:.1f} | {figures['p95']:.1f} | {figures['max']:.1f} "
            f"| {figures['p95'] / base:.2f} | {goal} | {met} |"
        )
    lines += [
        "",
        f"Database: {backend}, {RUNS} runs ({LIVE_RUNS} live) and {TASKS:,} tasks; "
        f"{requests} sequential requests per page after 10 warm-up ones, logged in.",
        f"Machine: {os.cpu_count()} CPUs (server pinned to one, client on the other), "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()};"
        f" measured on {datetime.date.today().isoformat()}.",
        f"Command: `{command}`",
    ]
    return "\n".join(lines)


def write_doc(section: str, backend: str) -> None:
    begin, end = (marker.format(backend.lower()) for marker in MARKERS)
    text = DOC.read_text()
    block = f"{begin}\n{section}\n{end}"
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + f"\n\n### {backend}\n\n{block}\n"
    DOC.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--database-url", default="", help="default: SQLite in a temp dir")
    parser.add_argument("--requests", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        settings = Settings(
            data_dir=data_dir, database_url=options.database_url, argon2_time_cost=1,
            argon2_memory_kib=8,
        )  # fmt: skip
        with open_storage(settings) as storage:
            make_accounts(storage, settings).create_user("alice", PASSWORD)
            run_id = fill(storage)
        server = start_server(data_dir, options.database_url)
        try:
            if len(os.sched_getaffinity(0)) > 1:
                os.sched_setaffinity(0, {1})
            client = logged_in_client(server.url)
            results = {
                "baseline": measure(client, "/login", options.requests),
                "home": measure(client, "/tests", options.requests),
                "run": measure(client, f"/tests/view/{run_id}", options.requests),
                "run_live": measure(client, f"/tests/view/{run_id}?live=1", options.requests),
            }
        finally:
            server.process.terminate()
            server.process.wait(10)
    backend = "PostgreSQL" if options.database_url.startswith("postgres") else "SQLite"
    section = report(results, backend, options.requests, command_line())
    print(section)
    if options.write:
        write_doc(section, backend)


if __name__ == "__main__":
    main()
