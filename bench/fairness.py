"""Fairness of the request_task gate: one account floods, the fleet goes on.

Run: .venv/bin/python bench/fairness.py [--seconds 30] [--rate 40] [--runs 20] [--write]
     [--database-url URL] [--compare-src DIR --compare-label TEXT]

Honest workers of 8 accounts ask for tasks open-loop at `--rate` calls per
second (each call a new machine, from its own address), and their latency is
measured from each call's intended send time. In a second phase one more
account keeps 20 times its share of the gate in flight (40 calls, the default
share being 2 of 5 places), re-sending the moment each reply comes, from one
address. Both phases run against a server with the default share, then
against a second server for comparison: one where an account may hold the
whole gate (ARBITER_TASK_SEMAPHORE_PER_ACCOUNT=5), or with `--compare-src`
the `src/` of another checkout (e.g. `git archive <commit> src | tar -x -C
DIR`: the code before a change), named in the table by `--compare-label`.
The honest-only phase on the same server is each flood phase's baseline.
Server pinned to CPU 0, this generator to CPU 1; loopback only.
"""

import argparse
import asyncio
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from arbiter.domain.runs.admission import fair_share
from arbiter.runtime.settings import TASK_SEMAPHORE_SIZE
from bench.lib import harness
from bench.lib.fleetsim import clock, percentile, worker_info
from bench.lib.httpclient import HttpError, Pool
from tests.web.live_server import Server, start_server

_decode = msgspec.json.Decoder().decode
HONEST_ACCOUNTS = 8
FLOOD_FACTOR = 20
WARM_UP = 3.0  # s of each phase left out of the figures
SHARE = fair_share(TASK_SEMAPHORE_SIZE)
MAX_HONEST_TOO_BUSY = 0.01  # of the honest calls during the flood (exit status 1 beyond)


@dataclass
class Phase:
    """What the honest callers (and the flood, if any) saw in one phase."""

    name: str
    latencies: list[float] = field(default_factory=list)  # s, answered calls in the window
    too_busy: int = 0
    errors: int = 0
    flood_calls: int = 0
    flood_too_busy: int = 0
    window: float = 0.0

    @property
    def honest_calls(self) -> int:
        return len(self.latencies)

    def p(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000

    @property
    def too_busy_share(self) -> float:
        return self.too_busy / max(1, self.honest_calls)


async def honest(
    pool: Pool, tokens: list[tuple[str, str]], phase: Phase, args: argparse.Namespace
) -> None:
    """Open loop: call i is due at start + i / rate, whatever came before."""
    rng = random.Random(1)
    start = clock()
    window_start = start + WARM_UP
    calls = int(args.rate * args.seconds)

    async def call(serial: int, due: float) -> None:
        username, token = tokens[serial % len(tokens)]
        info = worker_info(username, f"h{serial:x}"[-8:], rng)
        body = msgspec.json.encode({"password": token, "worker_info": info})
        headers = {"x-forwarded-for": f"10.{serial >> 16 & 255}.{serial >> 8 & 255}.{serial & 255}"}
        try:
            response = await pool.request("POST", "/api/request_task", body, headers)
        except HttpError:
            phase.errors += due >= window_start
            return
        if due < window_start:
            return
        phase.latencies.append(clock() - due)
        reply = _decode(response.body)
        if response.status != 200:
            phase.errors += 1
        elif "too busy" in str(reply.get("info", "")):
            phase.too_busy += 1

    pending = []
    for serial in range(calls):
        due = start + serial / args.rate
        await asyncio.sleep(max(0.0, due - clock()))
        pending.append(asyncio.create_task(call(serial, due)))
    await asyncio.gather(*pending)
    phase.window = args.seconds - WARM_UP


async def flood(pool: Pool, token: tuple[str, str], phase: Phase, stop: asyncio.Event) -> None:
    """FLOOD_FACTOR x the account's share of the gate in flight, never pausing."""
    username, password = token
    rng = random.Random(2)
    serial = 0

    async def caller() -> None:
        nonlocal serial
        while not stop.is_set():
            serial += 1
            info = worker_info(username, f"f{serial:x}"[-8:], rng)
            body = msgspec.json.encode({"password": password, "worker_info": info})
            try:
                response = await pool.request("POST", "/api/request_task", body)
            except HttpError:
                continue
            phase.flood_calls += 1
            if "too busy" in str(_decode(response.body).get("info", "")):
                phase.flood_too_busy += 1

    await asyncio.gather(*(caller() for _ in range(FLOOD_FACTOR * SHARE)))


async def measure(
    server: Server,
    accounts: harness.Accounts,
    name: str,
    args: argparse.Namespace,
    *,
    flooding: bool,
) -> Phase:
    port = harness.port_of(server)
    phase = Phase(name)
    honest_pool = Pool("127.0.0.1", port, 32)
    flood_pool = Pool("127.0.0.1", port, FLOOD_FACTOR * SHARE)
    stop = asyncio.Event()
    flooder = (
        asyncio.create_task(flood(flood_pool, accounts.workers[-1], phase, stop))
        if flooding
        else None
    )
    try:
        await honest(honest_pool, accounts.workers[:HONEST_ACCOUNTS], phase, args)
    finally:
        stop.set()
        if flooder is not None:
            await flooder
        honest_pool.close()
        flood_pool.close()
    print(
        json.dumps(
            {
                "phase": name,
                "calls": phase.honest_calls,
                "p99_ms": round(phase.p(99), 2),
                "too_busy": phase.too_busy,
                "flood_calls": phase.flood_calls,
            }
        ),
        flush=True,
    )
    return phase


async def server_phases(
    data: Path,
    accounts: harness.Accounts,
    args: argparse.Namespace,
    *,
    env: dict[str, str],
    label: str,
    repo: str | None,
) -> tuple[Phase, Phase, list[str]]:
    """Baseline then flood against one server; `repo`: submit the runs first."""
    server = start_server(
        data, args.database_url, {"ARBITER_LOG_LEVEL": "warning", **env}, cpus=harness.SERVER_CPU
    )
    with harness.running(server):
        if repo is not None:
            harness.submit_runs(server.url, accounts, repo, args.runs)
        baseline = await measure(server, accounts, f"{label}, honest only", args, flooding=False)
        flooded = await measure(server, accounts, f"{label}, with the flood", args, flooding=True)
        return baseline, flooded, harness.server_errors(server)


def row(phase: Phase, baseline: Phase) -> str:
    flood_rate = phase.flood_calls / phase.window if phase.window else 0.0
    flood_busy = phase.flood_too_busy / max(1, phase.flood_calls)
    ratio = phase.p(99) / baseline.p(99) if baseline.p(99) > 0 else float("nan")
    flood = f"{flood_rate:.0f} | {flood_busy * 100:.1f}%" if phase.flood_calls else "- | -"
    return (
        f"| {phase.name} | {phase.honest_calls} | {phase.p(50):.2f} | {phase.p(99):.2f}"
        f" | {ratio:.2f}"
        f" | {phase.too_busy_share * 100:.2f}% | {phase.errors} | {flood} |"
    )


async def fairness(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-fairness-") as scratch:
        data = scratch / "data"
        accounts = harness.create_accounts(data, args.database_url, HONEST_ACCOUNTS + 1)
        repo = harness.make_repo(scratch / "repo")
        label = f"share {SHARE} of {TASK_SEMAPHORE_SIZE}"
        fair = await server_phases(data, accounts, args, env={}, label=label, repo=repo)
        if args.compare_src:
            other = {"PYTHONPATH": str(Path(args.compare_src).absolute() / "src")}
            label = args.compare_label or f"the code in {args.compare_src}"
        else:
            other = {"ARBITER_TASK_SEMAPHORE_PER_ACCOUNT": str(TASK_SEMAPHORE_SIZE)}
            label = "share = the whole gate"
        unfair = await server_phases(data, accounts, args, env=other, label=label, repo=None)
    lines = [
        '| server, phase | honest calls | p50 ms | p99 ms | p99 / baseline | honest "too busy"'
        ' | errors | flood calls/s | flood "too busy" |',
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for baseline, flooded, _ in (fair, unfair):
        lines += [row(baseline, baseline), row(flooded, baseline)]
    crashes = fair[2] + unfair[2]
    lines += [
        "",
        f"- {HONEST_ACCOUNTS} honest accounts call request_task open-loop at {args.rate:g}/s in all"
        f" (each call a new machine from its own address; latency from the intended send time),"
        f" {args.seconds:g} s per phase, the first {WARM_UP:g} s left out; {args.runs} active runs;"
        f" {'PostgreSQL' if args.database_url else 'SQLite'}.",
        f"- The flood: one more account keeps {FLOOD_FACTOR * SHARE} calls in flight"
        f" ({FLOOD_FACTOR} times its share of {SHARE} places), each re-sent as soon as it is"
        " answered, from one address (so past its machine limit most calls are refused, cheaply).",
        "- Baseline of each p99 ratio: the honest-only phase on the same server, in the same run."
        f" Unhandled server exceptions: {len(crashes)}.",
    ]
    # The gate: the flood may not shut the fleet out (before the share, about half
    # of the honest calls were "too busy"); a few refusals remain when the flood's
    # load stretches the fleet's own calls past the places it leaves.
    failed = list(crashes)
    if fair[1].too_busy_share > MAX_HONEST_TOO_BUSY:
        failed.append(f"honest 'too busy' with the flood: {fair[1].too_busy_share:.2%}")
    return lines, failed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds per phase")
    parser.add_argument("--rate", type=float, default=40.0, help="honest calls per second")
    parser.add_argument("--runs", type=int, default=20, help="active runs")
    parser.add_argument("--database-url", default="", help="PostgreSQL URL (default SQLite)")
    parser.add_argument("--compare-src", default="", help="a checkout to compare with")
    parser.add_argument(
        "--compare-label", default="", help="the comparison's row label (what that checkout is)"
    )
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args(argv)
    args.scenario = "flood"
    return args


def main(argv: list[str] | None = None) -> int:
    scenarios = {"flood": fairness}
    titles = {"flood": "request_task fairness: one account floods the gate"}
    return harness.run_scenario("fairness", scenarios, titles, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
