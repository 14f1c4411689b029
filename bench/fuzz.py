"""Bad-input benchmarks: long API fuzzing, and slow-header clients.

Run:
  .venv/bin/python bench/fuzz.py long [--examples 1000] [--write]
  .venv/bin/python bench/fuzz.py slow-headers [--clients 1000] [--workers 2000] [--write]

long: tests/web/test_fuzz_api.py with `--examples` hypothesis cases per API
  operation (the suite runs 50): never a 5xx, every 4xx JSON {error, duration};
  prints the status codes each operation produced.
slow-headers: a fleet at cadence x4 plays against a primary three times in one
  run: alone, beside N clients that send their request headers one line a
  second and never finish (slowloris), and alone again; the workers' p99 per
  endpoint beside the slow clients must stay under twice the mean alone.
"""

import argparse
import ast
import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop

from bench.fleet import Options, fleet_config, p99_beside_table, run_phase
from bench.lib import harness
from bench.lib.command import command_line
from bench.lib.fleetsim import clock
from bench.lib.httpclient import Connection, HttpError


def long_fuzz(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    env = {**os.environ, "ARBITER_TEST_FUZZ_EXAMPLES": str(args.examples)}
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    command += ["tests/web/test_fuzz_api.py::test_fuzz_operation"]
    started = clock()
    done = subprocess.run(
        command, cwd=harness.ROOT, env=env, capture_output=True, text=True, check=False
    )
    seconds = clock() - started
    statuses = re.findall(r"^\.?([a-z_ ()]+): (\{.*\})$", done.stdout, flags=re.MULTILINE)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "no output"
    lines = [
        f"- {len(statuses)} operations x {args.examples} hypothesis examples each, in-process app"
        f" on SQLite, {seconds:.0f} s: `{summary}` (0 server errors is the gate).",
        "- Status codes per operation: "
        + "; ".join(f"{name} {_codes(codes)}" for name, codes in statuses)
        + ".",
    ]
    return lines, [] if done.returncode == 0 else [done.stdout[-3000:]]


def _codes(printed: str) -> str:
    """The test's `{200: 5, 400: 995}` as `200 x5, 400 x995`: a line per
    operation would make this section the page's longest."""
    codes: dict[int, int] = ast.literal_eval(printed)
    return ", ".join(f"{code} x{count}" for code, count in sorted(codes.items()))


def _closed(connection: Connection) -> bool:
    return connection.reader.at_eof() or connection.writer.is_closing()


async def slow_client(port: int, stop_at: float, counts: dict[str, int]) -> None:
    """Headers one line a second, never the blank line that ends them."""
    while clock() < stop_at:
        try:
            connection = await Connection.open("127.0.0.1", port)
        except HttpError:
            counts["refused"] += 1
            await asyncio.sleep(1.0)
            continue
        counts["connected"] += 1
        try:
            connection.send(b"POST /api/beat HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            line = 0
            while clock() < stop_at and not _closed(connection):
                await asyncio.sleep(1.0)
                line += 1
                connection.send(f"x-slow-{line}: {'a' * 20}\r\n".encode())
                await connection.writer.drain()
            if _closed(connection):
                counts["closed by server"] += 1
        except (ConnectionError, RuntimeError):  # uvloop: RuntimeError on a closed transport
            counts["closed by server"] += 1
        finally:
            connection.close()


async def slow_headers(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    options = Options(args.workers, args.duration, 4.0, args.ramp, args.workers, chaos=False)
    with harness.scratch_dir("arbiter-slow-") as scratch:
        data = scratch / "data"
        accounts = harness.create_accounts(data, "", 4)
        repo = harness.make_repo(scratch / "repo")
        with harness.running(harness.start_arbiter(data)) as server:
            harness.submit_runs(server.url, accounts, repo, 10)
            pid, port = server.process.pid, harness.port_of(server)
            config = fleet_config(options, accounts, strict=True)
            alone, _ = await run_phase("alone", pid, port, config, options)
            counts = {"connected": 0, "refused": 0, "closed by server": 0}
            stop_at = clock() + args.duration + 5.0
            slow = [
                asyncio.create_task(slow_client(port, stop_at, counts)) for _ in range(args.clients)
            ]
            await asyncio.sleep(2.0)
            config.generation = 1  # new machine names: the first fleet's tasks stay theirs
            beside, _ = await run_phase("beside slow clients", pid, port, config, options)
            await asyncio.gather(*slow)
            config.generation = 2
            again, _ = await run_phase("alone again", pid, port, config, options)
            crashes = harness.server_errors(server)
    lines, worst = p99_beside_table(alone, beside, again, "beside slow clients")
    lines += [
        "",
        f"- {args.workers} workers at cadence x4, {args.duration:g} s per phase"
        f" (ramp {args.ramp:g} s); {args.clients} slow-header clients: {counts}.",
        f"- Errors alone: {alone.errors or 'none'}; beside: {beside.errors or 'none'};"
        f" alone again: {again.errors or 'none'};"
        f" unhandled server exceptions: {len(crashes)}.",
    ]
    failed = crashes + (["p99 doubled"] if worst >= 2.0 else [])
    return lines, failed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["long", "slow-headers"])
    parser.add_argument("--examples", type=int, default=1000, help="long: cases per operation")
    parser.add_argument("--clients", type=int, default=1000, help="slow-headers: slow clients")
    parser.add_argument("--workers", type=int, default=2000, help="slow-headers: fleet size")
    parser.add_argument("--duration", type=float, default=90.0, help="slow-headers: s per phase")
    parser.add_argument("--ramp", type=float, default=30.0, help="slow-headers: fleet ramp")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.scenario == "long":
        lines, failed = long_fuzz(args)
    else:
        harness.pin_self_to_client_core()
        lines, failed = uvloop.run(slow_headers(args))
    command = command_line()
    machine = harness.machine(pinned=args.scenario != "long")
    body = "\n".join([*lines, f"- Machine: {machine}.", "", f"Command: `{command}`"])
    print(body)
    if args.write:
        title = "Fuzzing: every API operation" if args.scenario == "long" else "Slow-header clients"
        harness.write_section(f"fuzz-{args.scenario}", title, body)
    for line in failed[:20]:
        print("FAIL:", line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
