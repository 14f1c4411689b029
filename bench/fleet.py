"""Fleet benchmark: simulated workers against a real Arbiter primary.

Run: .venv/bin/python bench/fleet.py --workers N --duration S [--speedup 4]
     [--mix steady|heavy] [--database-url URL] [--runs 20] [--connections C] [--write]

Two mixes. steady: 30-minute tasks (29 updates), beats on their own clock,
worker tokens. heavy: tasks of 5-7 updates on small machines, so
assignments are 16 times as frequent; workers send their account password,
as the official worker does; 10 runs; a beat only when no update came for a
beat period.

The server is pinned to CPU 0 and this load generator to CPU 1. The same
schedule (same seed) first runs against a raw ASGI hello app served by the
same uvicorn setup: the baseline every figure is also given as a ratio to.
Then it runs against Arbiter with chaos (abrupt disconnects, failed tasks,
crashed workers), and the client's ledger of acknowledged results is
reconciled with the server's run totals: any difference fails the run
(exit status 1), as do server errors.

Latency is measured from each request's intended send time (open loop).
Figures are taken in the window after the start-up ramp. `--write` replaces
this scenario's section of docs/benchmarks.md.
"""

import argparse
import asyncio
import gc
import json
import sys
import time
from array import array
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2 as httpx
import uvloop

from bench.lib import collector, harness, host_noise, profile, threads
from bench.lib.command import command_line
from bench.lib.fleetsim import (
    TAIL_SAMPLES,
    WORKER_CONCURRENCY,
    Cadence,
    Chaos,
    Fleet,
    FleetConfig,
    clock,
    percentile,
    supported,
)
from bench.lib.httpclient import Pool
from tests.web.live_server import PASSWORD

ENDPOINTS = ("/api/request_version", "/api/request_task", "/api/update_task", "/api/beat")
# Reference figures (fishtest-reference 11, reliability-performance B5), ms.
REFERENCE_P50 = {
    "/api/beat": 6.0,
    "/api/update_task": 7.0,
    "/api/request_version": 4.0,
    "/api/request_task": 15.0,
}
MIXES = ("steady", "heavy")
# Small machines (3 or 4 slots) get tasks of 5 or 7 SPRT batches: at cadence x4,
# 10,000 of them make about 110 request_task, 110 request_version and 660
# update_task calls a second (the heavy-assignment mix).
HEAVY_CONCURRENCIES = (3, 4)
GOAL_P99 = {"/api/beat": 10.0, "/api/update_task": 20.0, "/api/request_task": 30.0}


@dataclass
class Phase:
    """What one run of the fleet against one server measured."""

    name: str
    workers: int
    window: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    # The window's second of each latency, in step with `latencies`.
    latency_seconds: dict[str, "array[int]"] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    events_by_second: dict[tuple[str, int], int] = field(default_factory=dict)
    requests: int = 0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    steal: tuple[float, float] = (0.0, 0.0)  # s stolen from the server's, the client's core
    steal_samples: list[host_noise.StealSample] = field(default_factory=list)  # about 1 s each
    rss_start_kib: int = 0
    rss_end_kib: int = 0
    rss_peak_kib: int = 0
    rss_series: list[tuple[float, int]] = field(default_factory=list)
    late_sends: int = 0
    non_json: int = 0
    connections: int = 0
    server_seen: collector.Snapshot | None = None  # the window's /metrics; None: not scraped
    thread_cpu: dict[int, threads.ThreadCpu] = field(default_factory=dict)  # the window's
    thread_names: dict[int, str] = field(default_factory=dict)

    def timeline(self) -> host_noise.Timeline:
        return host_noise.Timeline(
            self.latencies,
            self.latency_seconds,
            self.events_by_second,
            self.steal_samples,
            round(self.window),
        )

    def worst_by_second(self) -> dict[int, float]:
        """The slowest reply of each second of the window (by intended send time): a
        stall shows as seconds whose worst reply took far longer than the rest."""
        worst: dict[int, float] = {}
        for endpoint, latencies in self.latencies.items():
            for took, second in zip(latencies, self.latency_seconds[endpoint], strict=True):
                if took > worst.get(second, 0.0):
                    worst[second] = took
        return worst

    def p(self, endpoint: str, q: float) -> float:
        return percentile(self.latencies.get(endpoint, []), q) * 1000

    @property
    def cpu_per_1000(self) -> float:
        return self.server_cpu / max(1, self.requests) * 1000

    @property
    def core_share(self) -> float:
        return self.server_cpu / max(self.window, 1e-9)

    @property
    def too_busy_ratio(self) -> float:
        asked = self.events.get("request_task answered", 0) + self.events.get(
            "request_task too busy", 0
        )
        return self.events.get("request_task too busy", 0) / max(1, asked)

    @property
    def rss_slope_kib_per_min(self) -> float:
        points = self.rss_series
        if len(points) < 2:
            return 0.0
        n = len(points)
        mean_t = sum(t for t, _ in points) / n
        mean_r = sum(r for _, r in points) / n
        cov = sum((t - mean_t) * (r - mean_r) for t, r in points)
        var = sum((t - mean_t) ** 2 for t, _ in points)
        return cov / var * 60 if var else 0.0


@dataclass
class Options:
    workers: int
    duration: float
    speedup: float
    ramp: float
    connections: int
    chaos: bool
    seed: int = 1
    mix: str = "steady"


async def run_phase(
    name: str, server_pid: int, port: int, config: FleetConfig, options: Options
) -> tuple[Phase, Fleet]:
    """Run the fleet for `options.duration` seconds; measure after the ramp."""
    if options.connections >= options.workers:
        pools = [Pool("127.0.0.1", port, 1) for _ in range(options.workers)]
    else:
        shared = Pool("127.0.0.1", port, options.connections)
        pools = [shared]
    fleet = Fleet(config, lambda index: pools[index % len(pools)])
    start = clock()
    recorder = fleet.recorder
    recorder.window_start = start + options.ramp
    recorder.window_end = start + options.duration
    phase = Phase(name, options.workers, window=options.duration - options.ramp)
    sampler = asyncio.create_task(
        sample(phase, fleet, server_pid, pools, start=start, options=options)
    )
    # A full collection over 10,000 workers' objects stalls this loop for a second
    # and would be counted as server latency: the generator's garbage is acyclic.
    gc.disable()
    try:
        await fleet.run_until(start + options.duration)
    finally:
        gc.enable()
        await sampler
        for pool in {id(pool): pool for pool in pools}.values():
            pool.close()
    phase.latencies = recorder.latencies
    phase.latency_seconds = recorder.seconds
    phase.errors = {f"{endpoint} {kind}": n for (endpoint, kind), n in recorder.errors.items()}
    phase.events = dict(recorder.events)
    phase.events_by_second = dict(recorder.events_by_second)
    phase.late_sends = recorder.late_sends
    phase.non_json = recorder.non_json
    return phase, fleet


async def sample(
    phase: Phase, fleet: Fleet, pid: int, pools: list[Pool], *, start: float, options: Options
) -> None:
    """Server CPU, RSS, steal and request counts at the window's edges; RSS and
    steal every second."""
    await asyncio.sleep(max(0.0, start + options.ramp - clock()))
    cpu0, responses0 = harness.cpu_seconds(pid), fleet.recorder.responses
    threads0 = threads.thread_cpu(pid)
    client0 = harness.self_cpu_seconds()
    steal0 = core_steal()
    window_start, sampled, steal_then = start + options.ramp, clock(), steal0
    phase.rss_start_kib = harness.rss_kib(pid)
    while clock() < start + options.duration:
        rss = harness.rss_kib(pid)
        phase.rss_series.append((clock() - start, rss))
        phase.rss_peak_kib = max(phase.rss_peak_kib, rss)
        phase.connections = max(phase.connections, sum(p.open_connections for p in set(pools)))
        await asyncio.sleep(1.0)
        now, steal_now = clock(), core_steal()
        server, client = (
            (b - a) / (now - sampled) for a, b in zip(steal_then, steal_now, strict=True)
        )
        phase.steal_samples.append(
            host_noise.StealSample(sampled - window_start, now - window_start, server, client)
        )
        sampled, steal_then = now, steal_now
    phase.server_cpu = harness.cpu_seconds(pid) - cpu0
    phase.thread_cpu = threads.spent(threads0, threads.thread_cpu(pid))
    phase.client_cpu = harness.self_cpu_seconds() - client0
    # Up to the last sample's read, a moment ago: /proc/stat need not be read again.
    phase.steal = (steal_then[0] - steal0[0], steal_then[1] - steal0[1])
    phase.requests = fleet.recorder.responses - responses0
    phase.rss_end_kib = harness.rss_kib(pid)
    phase.thread_names = threads.thread_names(pid)  # after the window: py-spy takes a moment


def describe_steal(arbiter: Phase, baseline: Phase | None) -> str:
    """How much of each core the host took (steal time): the floor and the server
    are compared fairly only when it took about as much from both."""

    def shares(phase: Phase) -> str:
        server, client = steal_shares(phase)
        return f"{server:.1f}% of the server's core and {client:.1f}% of the load generator's"

    floor = f"; the baseline's window: {shares(baseline)}" if baseline else ""
    gap = abs(steal_shares(arbiter)[0] - steal_shares(baseline)[0]) if baseline else 0.0
    warning = (
        f" Not a fair floor: the host took over {UNFAIR_STEAL:.0f} points more in one window."
        if gap > UNFAIR_STEAL
        else ""
    )
    return f"- Taken by the host (steal time): {shares(arbiter)}{floor}.{warning}"


UNFAIR_STEAL = 5.0  # points of the server's core between the phases' steal


def steal_shares(phase: Phase) -> tuple[float, float]:
    """% of the server's core and of the load generator's the host took in the
    phase's window."""
    window = max(phase.window, 1e-9)
    server, client = phase.steal
    return server / window * 100, client / window * 100


def core_steal() -> tuple[float, float]:
    server, client = harness.steal_seconds(harness.SERVER_CPU, harness.CLIENT_CPU)
    return server, client


def p99_beside_table(
    alone: Phase, beside: Phase, again: Phase, beside_label: str
) -> tuple[list[str], float]:
    """The markdown table of each endpoint's p99 alone, beside some load and
    alone again, with the ratio to the mean alone; and the worst ratio.
    Endpoints with fewer than 100 samples alone are left out."""
    lines = [
        f"| endpoint | p99 alone ms | p99 {beside_label} ms | p99 alone again ms"
        " | ratio to the mean alone (goal < 2) |",
        "|---|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for endpoint in ENDPOINTS:
        if len(alone.latencies.get(endpoint, [])) < 100:
            continue
        a, b, c = (phase.p(endpoint, 99) for phase in (alone, beside, again))
        worst = max(worst, b / ((a + c) / 2))
        lines.append(
            f"| {endpoint.removeprefix('/api/')} | {a:.2f} | {b:.2f} | {c:.2f}"
            f" | {b / ((a + c) / 2):.2f} |"
        )
    return lines, worst


def fleet_config(options: Options, accounts: harness.Accounts, *, strict: bool) -> FleetConfig:
    heavy = options.mix == "heavy"
    return FleetConfig(
        workers=options.workers,
        cadence=Cadence.real(options.speedup),
        chaos=Chaos() if options.chaos and strict else Chaos(0.0, 0.0, 0.0),
        # The official worker sends its account password on every call.
        tokens=[(name, PASSWORD) for name, _ in accounts.workers] if heavy else accounts.workers,
        ramp=options.ramp,
        seed=options.seed,
        strict=strict,
        concurrencies=HEAVY_CONCURRENCIES if heavy else (WORKER_CONCURRENCY,),
        beat_after_update=heavy,
    )


def reconcile(url: str, fleet: Fleet, run_ids: list[str]) -> list[str]:
    """Differences between the ledger and the server (empty: exact)."""
    problems = []
    with httpx.Client(base_url=url, timeout=60.0) as client:
        for run_id, task_id, entry in fleet.ledger.in_doubt():
            stats = read_json(client, f"/api/get_task/{run_id}/{task_id}")["stats"]
            stored = (stats["wins"], stats["losses"], stats["draws"], tuple(stats["pentanomial"]))
            if stored not in (entry.acked, entry.in_doubt):
                problems.append(f"task {run_id}/{task_id}: stored {stored}, ledger {entry}")
            entry.acked, entry.in_doubt = stored, None
        expected = fleet.ledger.totals()
        for run_id in run_ids:
            results = read_json(client, f"/api/get_run/{run_id}")["results"]
            server = (
                results["wins"],
                results["losses"],
                results["draws"],
                tuple(results["pentanomial"]),
            )
            mine = expected.get(run_id, (0, 0, 0, (0, 0, 0, 0, 0)))
            if server != mine:
                problems.append(f"run {run_id}: server {server} != ledger {mine}")
                problems += task_differences(client, fleet, run_id)
    return problems


def read_json(client: httpx.Client, path: str, patience: float = 60.0) -> Any:
    """A GET's JSON once the server answers it: a 503 (a server shedding load on
    a loaded host, or one just become the primary) is asked again, as a worker
    would, for `patience` seconds."""
    deadline = time.monotonic() + patience
    while True:
        reply = client.get(path)
        if reply.status_code != 503 or time.monotonic() > deadline:
            reply.raise_for_status()
            return reply.json()
        time.sleep(0.5)


def task_differences(client: httpx.Client, fleet: Fleet, run_id: str) -> list[str]:
    """The run's tasks whose stored stats differ from the ledger (diagnostics)."""
    found = []
    for (task_run, task_id), entry in sorted(fleet.ledger.tasks.items()):
        if task_run != run_id:
            continue
        stats = read_json(client, f"/api/get_task/{run_id}/{task_id}")["stats"]
        stored = (stats["wins"], stats["losses"], stats["draws"], tuple(stats["pentanomial"]))
        if stored != entry.acked:
            found.append(f"  task {run_id}/{task_id}: stored {stored}, acknowledged {entry.acked}")
    return found[:10]


@dataclass
class Setup:
    """Where a primary runs and what it serves the fleet."""

    data: Path
    database_url: str
    accounts: harness.Accounts
    repo: str
    runs: int
    pin: bool = True
    profile: Path | None = None  # py-spy's collapsed stacks of the window, written here


async def arbiter_phase(
    setup: Setup, config: FleetConfig, options: Options
) -> tuple[Phase, Fleet, list[str], list[str]]:
    """Start a primary, submit the runs, run the fleet, reconcile: (phase, fleet,
    ledger differences, unhandled server exceptions)."""
    server = harness.start_arbiter(setup.data, setup.database_url, pin=setup.pin)
    with harness.running(server):
        run_ids = harness.submit_runs(server.url, setup.accounts, setup.repo, setup.runs)
        pid, port = server.process.pid, harness.port_of(server)
        profiler = None
        if setup.profile is not None:
            profiler = asyncio.create_task(profile_window(pid, options, setup.profile))
        seen = asyncio.create_task(server_window(server.url, options))
        phase, fleet = await run_phase("arbiter", pid, port, config, options)
        if profiler is not None:
            await profiler
        phase.server_seen = await seen
        problems = reconcile(server.url, fleet, run_ids)
        return phase, fleet, problems, harness.server_errors(server)


async def profile_window(pid: int, options: Options, output: Path) -> None:
    """py-spy on the server for the measurement window, from the load's core."""
    await asyncio.sleep(options.ramp)
    recorder = profile.record(pid, options.duration - options.ramp, output, harness.CLIENT_CPU)
    _, errors = await asyncio.to_thread(recorder.communicate)
    if recorder.returncode != 0:
        print(f"py-spy failed: {errors.decode(errors='replace')[-500:]}", file=sys.stderr)


async def server_window(url: str, options: Options) -> collector.Snapshot:
    """What the server's /metrics saw in the measurement window (collector pauses,
    "too busy" by reason)."""
    await asyncio.sleep(options.ramp)
    start = await asyncio.to_thread(collector.scrape, url)
    await asyncio.sleep(options.duration - options.ramp)
    return await asyncio.to_thread(collector.scrape, url) - start


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}" if base > 0 else "-"


def render(arbiter: Phase, baseline: Phase | None, command: str, extra: list[str]) -> str:
    lines = [
        "| endpoint | requests | p50 ms | p99 ms | p99.9 ms | p50 / baseline | p99 / baseline"
        " | reference p50 | goal p99 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for endpoint in ENDPOINTS:
        count = len(arbiter.latencies.get(endpoint, []))
        p50, p99, p999 = (tail(arbiter.p(endpoint, q), count, q) for q in (50, 99, 99.9))
        ours50, ours99 = arbiter.p(endpoint, 50), arbiter.p(endpoint, 99)
        base50 = baseline.p(endpoint, 50) if baseline else 0.0
        base99 = baseline.p(endpoint, 99) if baseline else 0.0
        goal = GOAL_P99.get(endpoint)
        lines.append(
            f"| {endpoint.removeprefix('/api/')} | {count} | {p50} | {p99} | {p999}"
            f" | {ratio(ours50, base50)} | {ratio(ours99, base99)}"
            f" | {REFERENCE_P50[endpoint]:g}"
            f" | {'<= ' + format(goal, 'g') if goal else '-'} |"
        )
    if baseline is not None:
        lines.append(
            "| *baseline, all endpoints* | "
            f"{sum(len(v) for v in baseline.latencies.values())} | "
            f"{_all(baseline, 50):.2f} | {_all(baseline, 99):.2f} | {_all(baseline, 99.9):.2f}"
            " | 1 | 1 | - | - |"
        )
    lines += [
        "",
        f"Percentiles in parentheses rest on fewer than {TAIL_SAMPLES} samples above them"
        " (the requests column is the count): they are among the largest values seen.",
        "Reference p50: fishtest's production figures (reliability-performance.md, not in"
        " this repository), measured elsewhere; shown beside ours, never divided into them.",
        *summary(arbiter, baseline),
        *extra,
        "",
        f"Command: `{command}`",
    ]
    return "\n".join(lines)


def tail(value_ms: float, count: int, q: float) -> str:
    """A percentile cell: in parentheses when too few samples lie above it."""
    return f"{value_ms:.2f}" if supported(count, q) else f"({value_ms:.2f})"


def _all(phase: Phase, q: float) -> float:
    values = [v for series in phase.latencies.values() for v in series]
    return percentile(values, q) * 1000


def summary(arbiter: Phase, baseline: Phase | None) -> list[str]:
    per_1000_workers = arbiter.core_share / (arbiter.workers / 1000) * 100
    base_cpu = baseline.cpu_per_1000 if baseline else 0.0
    errors = ", ".join(f"{k}: {v}" for k, v in sorted(arbiter.errors.items())) or "none"
    events = ", ".join(f"{k}: {v}" for k, v in sorted(arbiter.events.items()))
    return [
        f"- Window: {arbiter.window:.0f} s after the ramp; {arbiter.requests} replies"
        f" ({arbiter.requests / arbiter.window:.0f}/s); peak client connections"
        f" {arbiter.connections}.",
        f"- Server CPU: {arbiter.cpu_per_1000:.3f} s per 1,000 requests"
        f" ({ratio(arbiter.cpu_per_1000, base_cpu)}x the baseline's {base_cpu:.3f});"
        f" {arbiter.core_share * 100:.1f}% of a core, {per_1000_workers:.2f}% per 1,000 workers"
        " at this cadence.",
        threads.describe(arbiter.thread_cpu, arbiter.thread_names),
        f"- Server RSS: {arbiter.rss_start_kib / 1024:.0f} MiB at the window's start,"
        f" {arbiter.rss_end_kib / 1024:.0f} MiB at its end, peak {arbiter.rss_peak_kib / 1024:.0f}"
        f" MiB; slope {arbiter.rss_slope_kib_per_min:.0f} KiB/min"
        + (f" (baseline peak {baseline.rss_peak_kib / 1024:.0f} MiB)." if baseline else "."),
        f'- "Too busy": {arbiter.too_busy_ratio * 100:.3f}% of request_task replies'
        + (collector.describe_too_busy(arbiter.server_seen.too_busy) if arbiter.server_seen else "")
        + ".",
        f"- Errors by kind: {errors}. Replies that were not JSON: {arbiter.non_json}.",
        stalls(arbiter),
        host_noise.describe(arbiter.timeline(), GOAL_P99),
        *(
            [
                collector.describe(arbiter.server_seen.pauses),
                collector.describe_commits(arbiter.server_seen.histograms),
                collector.describe_app_latency(arbiter.server_seen.histograms),
            ]
            if arbiter.server_seen is not None
            else []
        ),
        f"- Events: {events}.",
        f"- Load generator: {arbiter.client_cpu / arbiter.window * 100:.0f}% of its core;"
        f" sends later than 10 ms after their intended time: {arbiter.late_sends}.",
        describe_steal(arbiter, baseline),
    ]


STALL_SECONDS = 1.0  # a second of the window whose slowest reply took longer stalled


def stalls(phase: Phase) -> str:
    """The seconds of the window in which some reply took over STALL_SECONDS."""
    worst_by_second = phase.worst_by_second()
    stalled = sorted(s for s, took in worst_by_second.items() if took > STALL_SECONDS)
    if not stalled:
        worst = max(worst_by_second.values(), default=0.0)
        return (
            f"- Stalls (a reply over {STALL_SECONDS:g} s): none;"
            f" slowest reply {worst * 1000:.0f} ms."
        )
    worst_second = max(stalled, key=lambda s: worst_by_second[s])
    return (
        f"- Stalls (a reply over {STALL_SECONDS:g} s): in {len(stalled)} of"
        f" {len(worst_by_second)} seconds; the worst at +{worst_second} s of the window,"
        f" {worst_by_second[worst_second]:.1f} s."
    )


async def main_async(args: argparse.Namespace) -> int:
    options = Options(
        workers=args.workers,
        duration=args.duration,
        speedup=args.speedup,
        ramp=args.ramp if args.ramp is not None else min(60.0, args.duration / 4),
        connections=args.connections or min(args.workers, 15_000),
        chaos=not args.no_chaos,
        seed=args.seed,
        mix=args.mix,
    )
    with harness.scratch_dir("arbiter-fleet-") as scratch:
        data = scratch / "data"
        accounts = harness.create_accounts(data, args.database_url, args.users)
        repo = harness.make_repo(scratch / "repo")
        baseline = None
        if not args.no_baseline:
            with harness.running(harness.start_hello(scratch)) as hello:
                config = fleet_config(options, accounts, strict=False)
                pid, port = hello.process.pid, harness.port_of(hello)
                short = replace(options, duration=args.baseline_duration or options.duration)
                baseline, _ = await run_phase("baseline", pid, port, config, short)
            print(json.dumps(_brief(baseline)), flush=True)
        if args.baseline_only:
            return 0
        config = fleet_config(options, accounts, strict=True)
        setup = Setup(data, args.database_url, accounts, repo, args.runs, profile=args.profile)
        arbiter, fleet, problems, crashes = await arbiter_phase(setup, config, options)
        print(json.dumps(_brief(arbiter)), flush=True)
    acked = sum(1 for entry in fleet.ledger.tasks.values() if entry.acked[0] + entry.acked[2])
    extra = [
        f"- Ledger: {len(fleet.ledger.tasks)} tasks ({acked} with acknowledged games) over"
        f" {args.runs} runs; server totals {'equal' if not problems else 'DIFFER FROM'} the"
        " client's ledger of acknowledged results"
        f"{' exactly' if not problems else ''}; unhandled server exceptions: {len(crashes)}.",
        f"- Machine: {harness.machine()}.",
    ]
    body = render(arbiter, baseline, command_line(), extra)
    print(body)
    if args.write:
        mix = "" if args.mix == "steady" else f", {args.mix} mix"
        label = args.label or f"{args.workers} workers, cadence x{args.speedup:g}{mix}"
        key = f"fleet-{args.workers}-x{args.speedup:g}{'' if not mix else '-' + args.mix}"
        harness.write_section(key, label, body)
    failed = bool(problems or crashes or arbiter.non_json)
    for line in problems[:20] + crashes[:20]:
        print("FAIL:", line, file=sys.stderr)
    return 1 if failed else 0


def _brief(phase: Phase) -> dict[str, object]:
    return {
        "phase": phase.name,
        "requests": phase.requests,
        "late_sends": phase.late_sends,
        "client_cpu_s": round(phase.client_cpu, 1),
        "p50_ms": {e: round(phase.p(e, 50), 2) for e in ENDPOINTS},
        "p99_ms": {e: round(phase.p(e, 99), 2) for e in ENDPOINTS},
        "cpu_s_per_1000": round(phase.cpu_per_1000, 4),
        "steal_pct": [round(share, 2) for share in steal_shares(phase)],
        "errors": phase.errors,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True, help="seconds per phase")
    parser.add_argument("--speedup", type=float, default=4.0, help="cadence multiplier")
    parser.add_argument("--ramp", type=float, help="start-up ramp excluded from figures")
    parser.add_argument(
        "--mix",
        choices=MIXES,
        default="steady",
        help="steady: 30-minute tasks, beats on their own clock; heavy: tasks of 5-7"
        " updates, account passwords, beats only between slow updates",
    )
    parser.add_argument("--runs", type=int, help="active runs (default 20; heavy mix 10)")
    parser.add_argument("--users", type=int, default=8, help="accounts the workers share")
    parser.add_argument("--connections", type=int, help="client sockets (default one a worker)")
    parser.add_argument("--database-url", default="", help="PostgreSQL URL (default SQLite)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--baseline-only", action="store_true", help="only the hello server")
    parser.add_argument(
        "--baseline-duration", type=float, help="seconds of the baseline phase (default: same)"
    )
    parser.add_argument("--no-chaos", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--label", default="", help="section title in docs/benchmarks.md")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--profile",
        type=Path,
        help="write py-spy's collapsed stacks of the server's window here (bench/lib/profile.py)",
    )
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 10 if args.mix == "heavy" else 20
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    harness.pin_self_to_client_core()
    return uvloop.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
