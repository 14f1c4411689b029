"""Fault benchmarks: kill -9 loops, a restart storm, a PostgreSQL restart.

Run:
  .venv/bin/python bench/faults.py kill --cycles 100 [--workers 300] [--database-url URL] [--write]
  .venv/bin/python bench/faults.py storm --workers 10000 [--write]
  .venv/bin/python bench/faults.py postgres [--workers 300] [--write]
  .venv/bin/python bench/faults.py failover [--workers 300] [--write]
  .venv/bin/python bench/faults.py standby --fault kill|freeze [--workers 300] [--write]

kill: the simulated fleet (bench/lib/fleetsim.py) plays against a primary that is
  SIGKILLed at random moments and restarted on the same port; at the end the
  server's run totals must equal the client's ledger of acknowledged results
  exactly (nothing acknowledged lost, nothing counted twice). Each restart's
  time from process start to the first served request is recorded.
storm: a fleet at cadence x4 is running when the primary is killed and
  restarted; measured: from the restart until every worker had a reply
  acknowledged again, and whether any reply was not JSON.
postgres: a fleet plays against a primary on its own PostgreSQL cluster, which
  is stopped and started again under load: the server must stay up, answer
  only JSON (retryable 503s while the database is away), and recover.
failover: the same against a primary with a synchronous replica, reached through
  a multi-host URL; the primary is stopped at once and the replica promoted.
  Measured: from the fault to the first acknowledged result (goal 15 s), and
  the ledger (nothing acknowledged lost, nothing counted twice).
standby: a primary and a standby on one PostgreSQL database behind a proxy that
  follows /readyz; the primary is killed (--fault kill) or frozen (--fault
  freeze, then woken). Measured: from the fault to the first acknowledged
  result, and the ledger against the new primary.
Exit status 1 when a gate fails.
"""

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


import httpx2 as httpx

from bench.fleet import reconcile
from bench.lib import harness
from bench.lib.fleetsim import Cadence, Chaos, Fleet, FleetConfig, clock, percentile
from bench.lib.httpclient import Pool
from bench.lib.ready_proxy import ReadyProxy
from tests.web.live_server import Server, free_port, stop

PG_BIN = Path("/usr/lib/postgresql/15/bin")
TAKEOVER_LIMIT = 120.0  # s: a standby that has not served by then has failed


@dataclass
class Arena:
    """A primary on a fixed port and the fleet playing against it."""

    data: Path
    database_url: str
    port: int
    server: Server
    run_ids: list[str]
    fleet: Fleet
    pools: list[Pool]
    pin: bool = True
    restarts: list[float] = field(default_factory=list)  # s from start to first reply

    def close(self) -> None:
        for pool in self.pools:
            pool.close()
        stop(self.server)

    def restart(self, kill: bool = True) -> None:
        """SIGKILL (or SIGTERM) the primary and start it again on the same port."""
        if kill:
            self.server.process.kill()
            self.server.process.wait()
        else:
            stop(self.server)
        started = time.monotonic()
        self.server = harness.start_arbiter(self.data, self.database_url, self.port, pin=self.pin)
        self.restarts.append(time.monotonic() - started)


async def open_arena(
    scratch: Path, args: argparse.Namespace, database_url: str, chaos: Chaos
) -> Arena:
    data = scratch / "data"
    accounts = harness.create_accounts(data, database_url, args.users)
    repo = harness.make_repo(scratch / "repo")
    port = free_port()
    server = harness.start_arbiter(data, database_url, port, pin=not args.no_pin)
    run_ids = harness.submit_runs(server.url, accounts, repo, args.runs)
    config = FleetConfig(
        workers=args.workers,
        cadence=Cadence.real(args.speedup),
        chaos=chaos,
        tokens=accounts.workers,
        ramp=args.ramp,
        update_tries=args.update_tries,
    )
    pools = [Pool("127.0.0.1", port, 1) for _ in range(args.workers)]
    fleet = Fleet(config, lambda index: pools[index])
    fleet.recorder.window_start = 0.0
    return Arena(data, database_url, port, server, run_ids, fleet, pools, pin=not args.no_pin)


def errors_text(fleet: Fleet) -> str:
    items = sorted(fleet.recorder.errors.items(), key=lambda item: -item[1])
    return ", ".join(f"{endpoint} {kind}: {n}" for (endpoint, kind), n in items) or "none"


# ---------------------------------------------------------------- kill -9 loop


async def kill_loop(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    rng = random.Random(args.seed)
    with harness.scratch_dir("arbiter-kill-") as scratch:
        arena = await open_arena(scratch, args, args.database_url, Chaos())
        crashes: list[str] = []

        async def faults() -> None:
            for _ in range(args.cycles):
                await asyncio.sleep(rng.uniform(args.min_gap, args.max_gap))
                crashes.extend(harness.server_errors(arena.server))
                await asyncio.to_thread(arena.restart)

        seconds = args.ramp + args.cycles * (args.max_gap + 5.0) + 60.0
        playing = asyncio.create_task(arena.fleet.run_until(clock() + seconds))
        await asyncio.sleep(args.ramp)
        await faults()
        await asyncio.sleep(5.0)  # a quiet spell: in-doubt updates get retried
        arena.fleet.stop_at = clock()
        await playing
        problems = reconcile(arena.server.url, arena.fleet, arena.run_ids)
        crashes.extend(harness.server_errors(arena.server))
        arena.close()
    restarts = sorted(arena.restarts)
    acked = sum(1 for entry in arena.fleet.ledger.tasks.values() if sum(entry.acked[3]))
    lines = [
        f"- kill -9 cycles: {len(restarts)} (gaps U({args.min_gap:g}, {args.max_gap:g}) s) under"
        f" {args.workers} workers at cadence x{args.speedup:g}"
        f" ({'PostgreSQL' if args.database_url else 'SQLite'}).",
        f"- Ledger: {len(arena.fleet.ledger.tasks)} tasks, {acked} with acknowledged games;"
        f" server totals {'equal' if not problems else 'DIFFER FROM'} the ledger"
        f"{' exactly (0 lost, 0 double-counted)' if not problems else ''}.",
        f"- Serving after start (process start to first reply): min {restarts[0]:.2f} s,"
        f" median {statistics.median(restarts):.2f} s, max {restarts[-1]:.2f} s (goal <= 2 s).",
        f"- Replies that were not JSON: {arena.fleet.recorder.non_json}; unhandled server"
        f" exceptions: {len(crashes)}.",
        "- Client-side errors by kind (transport errors are the kills):"
        f" {errors_text(arena.fleet)}.",
    ]
    failed = problems + crashes
    if arena.fleet.recorder.non_json:
        failed.append("non-JSON replies")
    return lines, failed


# ---------------------------------------------------------------- restart storm


async def storm(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-storm-") as scratch:
        arena = await open_arena(scratch, args, args.database_url, Chaos(0.0, 0.0, 0.0))
        playing = asyncio.create_task(arena.fleet.run_until(clock() + 3600.0))
        await asyncio.sleep(args.ramp + args.settle)
        fleet = arena.fleet
        fleet.recorder.errors.clear()
        error_times: list[float] = []
        fleet.recorder.error_times = error_times
        fleet.mark = clock()
        await asyncio.to_thread(arena.restart, not args.graceful)
        started = clock()
        fleet.recorder.latencies.clear()
        fleet.recorder.window_start = started
        while len(fleet.alive_after) < args.workers and clock() - started < args.limit:
            await asyncio.sleep(0.5)
        back = clock() - started
        fleet.stop_at = clock()
        await playing
        crashes = harness.server_errors(arena.server)
        problems = reconcile(arena.server.url, fleet, arena.run_ids)
        arena.close()
    how = "SIGTERM" if args.graceful else "kill -9"
    last_error = max(error_times, default=started) - started
    after = [v for series in fleet.recorder.latencies.values() for v in series]
    p99 = percentile(after, 99) * 1000
    lines = [
        f"- {args.workers} workers at cadence x{args.speedup:g}; primary stopped with {how} and"
        f" restarted ({arena.restarts[0]:.2f} s from process start to first reply).",
        f"- Last failed request {last_error:.1f} s after the restart (goal: steady state <= 60 s);"
        f" p99 of all requests sent after the restart {p99:.1f} ms.",
        f"- {len(fleet.alive_after)} of {args.workers} workers had a reply acknowledged again"
        f" {back:.1f} s after the restart (bounded below by the cadence: a worker's next"
        f" request is up to 1.5 x {120 / args.speedup:g} s away).",
        f"- Replies that were not JSON: {fleet.recorder.non_json}; unhandled server exceptions:"
        f" {len(crashes)}; ledger {'exact' if not problems else 'DIFFERS'}.",
        f"- Client-side errors by kind from the stop on: {errors_text(fleet)}.",
    ]
    failed = problems + crashes
    if fleet.recorder.non_json or len(fleet.alive_after) < args.workers or last_error > 60:
        failed.append("non-JSON replies, workers not back or errors past 60 s")
    return lines, failed


# ---------------------------------------------------------------- PostgreSQL restart


def pg_ctl(directory: Path, *args: str) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(directory), *args],
        check=True,
        capture_output=True,
    )


def pg_start(directory: Path, port: int) -> None:
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {directory} -c max_connections=300"
    pg_ctl(directory, "-l", str(directory / "server.log"), "-w", "-o", options, "start")


@dataclass(frozen=True)
class Recovery:
    """The outage as the workers saw it, from their own request times."""

    text: str
    after_back: float  # s from the database's return until the last failed request


def outage_recovery(
    stopping: float, back: float, error_times: list[float], acks_after_back: list[float]
) -> Recovery:
    """Recovery is measured from the first request that failed once the stop began
    to the later of the last failed request and the first acknowledged reply
    after the database came back: never 0 by construction."""
    errors = [t for t in error_times if t >= stopping]
    if not errors:
        return Recovery("Recovery: no request failed while the database was down", 0.0)
    first_error, last_error = min(errors), max(errors)
    first_ack = min(acks_after_back, default=float("nan"))
    recovered = max(last_error, first_ack)
    text = (
        f"Recovery: {recovered - first_error:.2f} s from the first failed request"
        f" ({first_error - stopping:.2f} s after the stop command) to the later of the last"
        f" failed request ({last_error - back:+.2f} s from the database's return; goal <= 10 s)"
        f" and the first acknowledged reply after the return ({first_ack - back:+.2f} s);"
        f" {len(errors)} failed requests"
    )
    return Recovery(text, max(0.0, last_error - back))


@contextmanager
def postgres_cluster(directory: Path, action: str, *ports: int) -> Iterator[str]:
    """`scripts/postgres ACTION DIRECTORY PORT...` (a cluster, or a pair),
    stopped on leaving; its URL."""
    directory.parent.chmod(0o755)  # the clusters belong to the postgres user
    script = str(harness.ROOT / "scripts" / "postgres")
    started = subprocess.run(
        [script, action, str(directory), *map(str, ports)],
        check=True,
        capture_output=True,
        text=True,
    )
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run([script, "stop", str(directory)], check=False)


async def postgres_restart(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    with harness.scratch_dir("arbiter-pgfault-") as scratch:
        cluster, port = scratch / "pg", free_port()
        with postgres_cluster(cluster, "start", port) as url:
            # Our own settings (fsync on): stop the scripts' instance, start ours.
            pg_ctl(cluster, "-m", "fast", "-w", "stop")
            pg_start(cluster, port)
            return await _postgres_under_load(scratch, args, cluster, port, url)


async def _postgres_under_load(
    scratch: Path, args: argparse.Namespace, cluster: Path, port: int, url: str
) -> tuple[list[str], list[str]]:
    def restart() -> None:
        pg_ctl(cluster, "-m", "fast", "-w", "stop")
        time.sleep(args.outage)
        pg_start(cluster, port)

    what = f"fsync on; the database was stopped (pg_ctl -m fast) for {args.outage:g} s under load"
    lines, failed, timing = await _database_fault(scratch, args, url, restart, what)
    if timing.recovery.after_back > 10.0:
        failed.append("slow recovery: requests failed more than 10 s after the database was back")
    return lines, failed


async def postgres_failover(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """A primary with a synchronous streaming replica (scripts/postgres
    start-pair); the server reaches them through one multi-host URL with
    target_session_attrs=read-write. Under load the primary's processes are
    stopped at once (pg_ctl -m immediate, as if its machine died) and the
    replica is promoted (pg_ctl promote)."""
    with harness.scratch_dir("arbiter-pgfailover-") as scratch:
        pair = scratch / "pg"

        def failover() -> None:
            pg_ctl(pair / "primary", "-m", "immediate", "-w", "stop")
            pg_ctl(pair / "replica", "-w", "promote")

        what = (
            "fsync off, one synchronous replica; the primary was stopped (pg_ctl -m immediate)"
            " and its replica promoted under load"
        )
        with postgres_cluster(pair, "start-pair", free_port(), free_port()) as url:
            lines, failed, timing = await _database_fault(scratch, args, url, failover, what)
    served = timing.first_ack - timing.fault
    lines.insert(
        1, f"- From the fault to the first acknowledged result: {served:.2f} s (goal <= 15 s)."
    )
    if not served <= 15.0:
        failed.append(f"service came back {served:.1f} s after the fault (goal 15 s)")
    return lines, failed


@dataclass(frozen=True)
class FaultTiming:
    fault: float  # when the fault began (the fleet's clock)
    back: float  # when the fault's command returned (database back, or replica promoted)
    first_ack: float  # the first acknowledged reply after that (nan: none)
    recovery: Recovery


async def _database_fault(
    scratch: Path,
    args: argparse.Namespace,
    url: str,
    fault: Callable[[], None],
    what: str,
) -> tuple[list[str], list[str], FaultTiming]:
    """A fleet plays against a primary on `url`; `fault` (blocking) acts on the
    database under load; then the fleet plays on. The server must stay up,
    answer only JSON (retryable 503s meanwhile) and end with the ledger exact."""
    arena = await open_arena(scratch, args, url, Chaos(0.0, 0.0, 0.0))
    fleet = arena.fleet
    playing = asyncio.create_task(fleet.run_until(clock() + 3600.0))
    await asyncio.sleep(args.ramp + args.settle)
    fleet.recorder.errors.clear()
    error_times: list[float] = []
    fleet.recorder.error_times = error_times
    stopping = clock()
    await asyncio.to_thread(fault)
    back = clock()
    fleet.mark = back
    fleet.alive_after.clear()
    await asyncio.sleep(args.settle)
    fleet.stop_at = clock()
    await playing
    alive = arena.server.process.poll() is None
    crashes = harness.server_errors(arena.server)
    problems = reconcile(arena.server.url, fleet, arena.run_ids)
    arena.close()
    kinds = {kind for (_, kind) in fleet.recorder.errors}
    unexpected = sorted(k for k in kinds if "503" not in k)
    acks = list(fleet.alive_after.values())
    recovery = outage_recovery(stopping, back, error_times, acks)
    lines = [
        f"- {args.workers} workers at cadence x{args.speedup:g} on PostgreSQL 15; {what};"
        f" {back - stopping:.2f} s from the fault to its command's return.",
        f"- Server process {'stayed up' if alive else 'DIED'}; replies that were not JSON:"
        f" {fleet.recorder.non_json}; error kinds other than JSON 503:"
        f" {', '.join(unexpected) or 'none'}; unhandled server exceptions logged: {len(crashes)}.",
        f"- {recovery.text}; {len(fleet.alive_after)} workers had replies acknowledged after"
        f" that; ledger {'exact' if not problems else 'DIFFERS'}.",
        f"- Client-side errors by kind: {errors_text(fleet)}.",
    ]
    failed = problems + unexpected
    if not alive or fleet.recorder.non_json:
        failed.append("server died or non-JSON replies")
    timing = FaultTiming(stopping, back, min(acks, default=float("nan")), recovery)
    return lines, failed, timing


# ---------------------------------------------------------------- a standby takes over


async def standby_takeover(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """A primary and a standby (`serve --role standby`) on one PostgreSQL
    database, the fleet reaching them through a proxy that sends each new
    connection to whichever answers /readyz 200 (bench/lib/ready_proxy.py).
    Under load the primary is killed (`--fault kill`, kill -9) or frozen
    (`--fault freeze`, SIGSTOP, woken by SIGCONT once the standby serves).
    Measured: from the fault to the first acknowledged result, and the
    ledger against the new primary (nothing acknowledged lost or counted
    twice, whatever the woken primary did)."""
    with (
        harness.scratch_dir("arbiter-standby-") as scratch,
        postgres_cluster(scratch / "pg", "start", free_port()) as url,
    ):
        return await _standby_under_load(scratch, args, url)


async def _standby_under_load(
    scratch: Path, args: argparse.Namespace, url: str
) -> tuple[list[str], list[str]]:
    env = {"ARBITER_LEASE_CHECK_SECONDS": str(args.lease_check)}
    accounts = harness.create_accounts(scratch / "primary", url, args.users)
    primary = harness.start_arbiter(scratch / "primary", url, pin=False, extra_env=env)
    standby_env = {**env, "ARBITER_ROLE": "standby"}
    standby = harness.start_arbiter(
        scratch / "standby", url, pin=False, extra_env=standby_env, ready="/healthz"
    )
    proxy = ReadyProxy([("127.0.0.1", primary.port), ("127.0.0.1", standby.port)])
    port = await proxy.start()
    pools: list[Pool] = []
    try:
        repo = harness.make_repo(scratch / "repo")
        run_ids = harness.submit_runs(primary.url, accounts, repo, args.runs)
        config = FleetConfig(
            workers=args.workers,
            cadence=Cadence.real(args.speedup),
            chaos=Chaos(0.0, 0.0, 0.0),
            tokens=accounts.workers,
            ramp=args.ramp,
            update_tries=args.update_tries,
        )
        pools = [Pool("127.0.0.1", port, 1) for _ in range(args.workers)]
        fleet = Fleet(config, lambda index: pools[index])
        playing = asyncio.create_task(fleet.run_until(clock() + 3600.0))
        await asyncio.sleep(args.ramp + args.settle)
        fleet.recorder.errors.clear()
        fault = clock()
        if args.fault == "kill":
            primary.process.kill()
        else:
            os.kill(primary.process.pid, signal.SIGSTOP)
        # Only the standby's answers count: a reply the primary sent just before
        # the fault can still be read after it.
        while not await asyncio.to_thread(is_ready, standby) and clock() - fault < TAKEOVER_LIMIT:
            await asyncio.sleep(0.05)
        fleet.mark = clock()
        fleet.alive_after.clear()
        while not fleet.alive_after and clock() - fault < TAKEOVER_LIMIT:
            await asyncio.sleep(0.05)
        served = min(fleet.alive_after.values(), default=float("nan")) - fault
        if args.fault == "freeze":
            os.kill(primary.process.pid, signal.SIGCONT)  # it wakes to a database taken over
        await asyncio.sleep(args.settle)
        fleet.stop_at = clock()
        await playing
        problems = reconcile(standby.url, fleet, run_ids)
        crashes = harness.server_errors(standby)
        alive = standby.process.poll() is None
    finally:
        await proxy.close()
        for pool in pools:
            pool.close()
        stop(standby)
        if primary.process.poll() is None:
            os.kill(primary.process.pid, signal.SIGCONT)
            stop(primary)
    what = {
        "kill": "killed (kill -9)",
        "freeze": "frozen (SIGSTOP; SIGCONT once the standby served)",
    }
    lines = [
        f"- {args.workers} workers at cadence x{args.speedup:g} on PostgreSQL 15 through a proxy"
        f" that follows /readyz; the primary {what[args.fault]} under load; lease checks every"
        f" {args.lease_check:g} s (a frozen primary's beat expires after three).",
        f"- From the fault to the first acknowledged result on the standby: {served:.2f} s.",
        f"- Standby {'stayed up' if alive else 'DIED'}; replies that were not JSON:"
        f" {fleet.recorder.non_json}; unhandled exceptions on the new primary: {len(crashes)};"
        f" {len(fleet.alive_after)} workers had results acknowledged after the fault;"
        f" ledger {'exact' if not problems else 'DIFFERS'}.",
        f"- Client-side errors by kind: {errors_text(fleet)}.",
    ]
    failed = list(problems)
    if not alive or fleet.recorder.non_json or crashes:
        failed.append("the new primary died, logged an exception or sent non-JSON replies")
    limit = 10.0 + (3 * args.lease_check if args.fault == "freeze" else 0.0)
    if not served <= limit:
        failed.append(f"served {served:.1f} s after the fault (limit {limit:g} s)")
    return lines, failed


def is_ready(server: Server) -> bool:
    """Whether the server's /readyz answers 200 (a primary holding its lease)."""
    try:
        return httpx.get(server.url + "/readyz", timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


# ---------------------------------------------------------------- main

SCENARIOS = {
    "kill": kill_loop,
    "storm": storm,
    "postgres": postgres_restart,
    "failover": postgres_failover,
    "standby": standby_takeover,
}
TITLES = {
    "kill": "Faults: kill -9 loop",
    "storm": "Faults: restart storm",
    "postgres": "Faults: PostgreSQL restart under load",
    "failover": "Faults: PostgreSQL failover to a promoted replica under load",
    "standby": "Faults: a standby takes over a killed or frozen primary under load",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--workers", type=int, default=300)
    parser.add_argument("--speedup", type=float, default=20.0)
    parser.add_argument("--cycles", type=int, default=100, help="kill: kill -9 cycles")
    parser.add_argument("--min-gap", type=float, default=1.0, help="kill: s between kills, min")
    parser.add_argument("--max-gap", type=float, default=4.0, help="kill: s between kills, max")
    parser.add_argument("--ramp", type=float, default=10.0, help="s for the fleet to start")
    parser.add_argument(
        "--settle", type=float, default=20.0, help="storm/postgres/failover: s of load"
    )
    parser.add_argument("--limit", type=float, default=180.0, help="storm: give up after (s)")
    parser.add_argument("--graceful", action="store_true", help="storm: SIGTERM, not kill -9")
    parser.add_argument("--outage", type=float, default=5.0, help="postgres: s stopped")
    parser.add_argument("--fault", choices=["kill", "freeze"], default="kill", help="standby")
    parser.add_argument(
        "--lease-check", type=int, default=5, help="standby: ARBITER_LEASE_CHECK_SECONDS"
    )
    parser.add_argument("--update-tries", type=int, default=8)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--database-url", default="", help="kill/storm: PostgreSQL URL")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-pin", action="store_true", help="do not pin the server (tests)")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return harness.run_scenario("faults", SCENARIOS, TITLES, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
