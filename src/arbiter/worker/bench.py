"""An engine's bench: its signature (node count) and this machine's speed.

`bench 16 1 13 default depth` is Stockfish's default bench; the node count
it prints is the signature a run may pin, and its nodes per second measure
the machine. Both engines bench at once, one per core, roughly the load
of the games to come (reference 2.5, points 2-3). Blocking: the task's thread.
"""

import re
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from arbiter.worker.errors import WorkerError

SIGNATURE_DEPTH = 13  # `bench` with no arguments: the depth signatures are taken at
QUICK_DEPTH = 9  # enough for an idea of the speed, in a tenth of the time
BENCH_SECONDS = 300.0
_NODES = re.compile(r"^Nodes searched\s*:\s*(\d+)", re.MULTILINE)
_NPS = re.compile(r"^Nodes/second\s*:\s*(\d+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class BenchResult:
    nodes: int
    nps: float


def run_bench(engine: Path, cwd: Path, depth: int = SIGNATURE_DEPTH) -> BenchResult:
    try:
        done = subprocess.run(  # noqa: S603 - the engine we built
            [str(engine), "bench", "16", "1", str(depth), "default", "depth"],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BENCH_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise WorkerError(f"{engine.name}: bench took over {BENCH_SECONDS:.0f} s") from None
    except OSError as error:
        raise WorkerError(f"{engine.name}: cannot run bench: {error}") from None
    output = done.stdout + done.stderr  # Stockfish prints its bench summary on stderr
    nodes, nps = _NODES.search(output), _NPS.search(output)
    if nodes is None or nps is None:
        raise WorkerError(f"{engine.name}: bench printed no node count (exit {done.returncode})")
    return BenchResult(int(nodes.group(1)), float(nps.group(1)))


def bench_all(engines: Sequence[Path], cwd: Path) -> list[BenchResult]:
    """Bench the engines at once, one process each."""
    with ThreadPoolExecutor(max_workers=max(1, len(engines)), thread_name_prefix="bench") as pool:
        return list(pool.map(lambda engine: run_bench(engine, cwd), engines))


def engine_arch(engine: Path, cwd: Path) -> str:
    """The CPU features the engine was built for, from its `compiler` command;
    "?" when it does not say (reference worker_info.ARCH)."""
    try:
        done = subprocess.run(  # noqa: S603 - the engine we built
            [str(engine)],
            input="compiler\nquit\n",
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=30.0,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    for line in done.stdout.splitlines():
        if "settings include:" in line:
            return line.split(":", 1)[1].strip() or "?"
    return "?"
