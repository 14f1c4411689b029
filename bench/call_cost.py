"""CPU per worker call on a real server, without a fleet: the web layer's cost.

The fleet (bench/fleet.py) measures the whole service on a realistic schedule,
over minutes, with whatever the host takes meanwhile. This measures what one
call costs in about a minute: `--connections` clients each send a call, read
its reply, pause 20 ms and send the next, for `--seconds`; the server's CPU
(from /proc) over the calls it served. Each round measures every server in
turn, so a change in the host's load falls on all of them:

- the floor: bench/lib/hello_app.py, a raw ASGI app on Arbiter's uvicorn setup;
- Arbiter from this checkout;
- with `--against REV`, Arbiter from REV, checked out into a temporary git
  worktree (its server runs from there; the client is this checkout's).

request_version, the default path, is served on the event loop alone once its
credentials are proven: above the floor it costs decoding, authentication from
memory, the reply and the request's passage through the app.

  .venv/bin/python bench/call_cost.py [--against REV] [--rounds 4] [--seconds 10]
"""

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lib import harness
from bench.lib.command import command_line
from bench.lib.fleetsim import worker_info
from bench.lib.harness import Rounds
from tests.web.live_server import Server

PAUSE = 0.02  # s a client waits between a reply and its next call
WARM_UP = 2.0  # s of calls before each measurement (credentials proven, caches warm)
ACCOUNTS = 10


def requests(path: str, accounts: harness.Accounts) -> list[bytes]:
    """One raw HTTP request per account: a worker's body, its own forwarded address."""
    made = []
    for index, (name, token) in enumerate(accounts.workers):
        info = worker_info(name, "cost", random.Random(index))
        body = json.dumps({"password": token, "worker_info": info}).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
            f"x-forwarded-for: 10.0.0.{index + 1}\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        made.append(head.encode() + body)
    return made


async def client(port: int, request: bytes, until: float) -> int:
    """Calls on one connection until `until` (loop time); how many were answered."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answered = 0
    try:
        while loop.time() < until:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"not a 200: {head[:80]!r}")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            )
            await reader.readexactly(length)
            answered += 1
            await asyncio.sleep(PAUSE)
    finally:
        writer.close()
    return answered


async def load(port: int, calls: list[bytes], connections: int, seconds: float) -> int:
    until = asyncio.get_running_loop().time() + seconds
    counts = await asyncio.gather(
        *(client(port, calls[i % len(calls)], until) for i in range(connections))
    )
    return sum(counts)


def cost_per_call(server: Server, calls: list[bytes], options: argparse.Namespace) -> float:
    """µs of server CPU per call, after a warm-up."""
    port = harness.port_of(server)
    asyncio.run(load(port, calls, options.connections, WARM_UP))
    before = harness.cpu_seconds(server.process.pid)
    answered = asyncio.run(load(port, calls, options.connections, options.seconds))
    spent = harness.cpu_seconds(server.process.pid) - before
    return spent / max(1, answered) * 1e6


def measure(options: argparse.Namespace, scratch: Path, against: Path | None) -> list[Rounds]:
    accounts = harness.create_accounts(scratch / "data", "", ACCOUNTS)
    calls = requests(options.path, accounts)
    arbiters: list[tuple[Rounds, Path | None]] = [(Rounds("arbiter (this checkout)"), None)]
    if against is not None:
        arbiters.append((Rounds(f"arbiter ({options.against})"), against))
    floor = Rounds("floor (raw ASGI app)")
    for _ in range(options.rounds):
        with harness.running(harness.start_hello(scratch)) as hello:
            floor.values.append(cost_per_call(hello, calls, options))
        for measured, source in arbiters:
            with harness.running(harness.start_arbiter(scratch / "data", source=source)) as server:
                measured.values.append(cost_per_call(server, calls, options))
                problems = harness.server_errors(server)
            if problems:
                raise RuntimeError(f"{measured.name} logged errors: {problems[:3]}")
    return [floor, *(measured for measured, _ in arbiters)]


def report(measured: list[Rounds], options: argparse.Namespace) -> list[str]:
    floor = measured[0].median
    lines = [
        f"CPU per {options.path} call: {options.connections} connections, each pausing"
        f" {PAUSE * 1000:.0f} ms between a reply and its next call; {options.rounds} rounds"
        f" of {options.seconds:g} s, the servers measured in turn in each round.",
        "",
        "| server | us per call (median) | each round | / floor |",
        "|---|---:|---|---:|",
    ]
    for entry in measured:
        lines.append(
            f"| {entry.name} | {entry.median:.1f} | {entry.listed()} | {entry.median / floor:.2f} |"
        )
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a git revision to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--path", default="/api/request_version")
    return parser.parse_args(argv)


def run(options: argparse.Namespace) -> list[str]:
    harness.pin_self_to_client_core()
    with harness.scratch_dir("call-cost-") as scratch:
        if options.against is None:
            return report(measure(options, scratch, None), options)
        with harness.source_tree(options.against, "call-cost-") as against:
            return report(measure(options, scratch, against), options)


def main() -> None:
    lines = run(parse(sys.argv[1:]))
    print("\n".join([*lines, "", f"- Machine: {harness.machine()}.", ""]))
    print(f"Command: `{command_line()}`")


if __name__ == "__main__":
    main()
