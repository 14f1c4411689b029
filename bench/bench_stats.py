"""Benchmark of the pure statistics (issue 3): us per call and ratio to a calibration loop.

Run: .venv/bin/python bench/bench_stats.py [--write]

The machine is a noisy 2-core box, so every figure is also given as a ratio to
a fixed pure-Python calibration loop (10^5 float multiply-adds) timed in the
same run: the ratio is what to compare across machines and days. Each figure
is the median over rounds of the best-of-repeats time. `--write` replaces the
section between the stats markers in docs/benchmarks.md.
"""

import argparse
import os
import platform
import random
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arbiter.stats import (
    aggregate_rows,
    chi2_residuals,
    fixed_games_elo,
    llr_logistic,
    llr_normalized,
    new_sprt,
    sprt_elo,
    update_sprt,
    worker_row,
)
from bench.command import command_line

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- stats:begin -->", "<!-- stats:end -->"
CALIBRATION_N = 100_000
ROUNDS = 3
# A 1M-game pentanomial run (500k pairs); the cost does not depend on N.
PENTA = [10789 * 2, 19328 * 2, 33806 * 2 + 31, 19402 * 2, 10543 * 2]


def calibration() -> None:
    """10^5 float multiply-adds in pure Python: the unit of the ratios."""
    acc = 0.0
    for i in range(CALIBRATION_N):
        acc = acc * 0.999999 + i
    if acc < 0:
        raise AssertionError


def _tasks(
    n_tasks: int = 5000, n_workers: int = 500
) -> list[tuple[str, tuple[float, float, float]]]:
    rng = random.Random(42)
    tasks = []
    for i in range(n_tasks):
        pairs = [rng.randint(5, 30), rng.randint(40, 80), rng.randint(80, 140), rng.randint(40, 80)]
        pairs.append(rng.randint(5, 30))
        wins = 2 * pairs[4] + pairs[3]
        losses = 2 * pairs[0] + pairs[1]
        draws = 2 * sum(pairs) - wins - losses
        tasks.append((f"worker{i % n_workers}", worker_row(wins, losses, draws, pairs)))
    return tasks


TASKS = _tasks()


def chi2_5000_tasks() -> None:
    chi2_residuals(aggregate_rows(TASKS))


CASES: list[tuple[str, Callable[[], object], float | None, float | None]] = [
    ("exact LLR, logistic (pentanomial)", lambda: llr_logistic(-3, 1, PENTA), 77.0, 30.0),
    ("exact LLR, normalized (pentanomial)", lambda: llr_normalized(0, 2, PENTA), 268.0, 100.0),
    ("update_sprt (normalized LLR + overshoot)",
     lambda: update_sprt(new_sprt(0.05, 0.05, 0, 2), PENTA), 438.0, None),
    ("SPRT analytics: Elo, 95% CI, LOS, LLR (normalized)",
     lambda: sprt_elo(PENTA, 0, 2, "normalized"), 5500.0, 500.0),
    ("fixed-games Elo, CI, LOS (pentanomial)", lambda: fixed_games_elo(PENTA), 328.0, None),
    ("chi-square residuals, 5,000 tasks / 500 workers", chi2_5000_tasks, None, 10_000.0),
]  # fmt: skip


def _per_call_us(func: Callable[[], object]) -> float:
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=3, number=number)) / number * 1e6


def measure() -> tuple[float, list[tuple[str, float, float, float | None, float | None]]]:
    """Median over rounds of (calibration us, [(name, us, ratio, reference, goal)])."""
    calib: list[float] = []
    per_case: dict[str, list[float]] = {name: [] for name, *_ in CASES}
    for _ in range(ROUNDS):
        calib.append(_per_call_us(calibration))
        for name, func, _ref, _goal in CASES:
            per_case[name].append(_per_call_us(func))
    unit = statistics.median(calib)
    rows = []
    for name, _func, ref, goal in CASES:
        us = statistics.median(per_case[name])
        rows.append((name, us, us / unit, ref, goal))
    return unit, rows


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def render(unit: float, rows: list[tuple[str, float, float, float | None, float | None]]) -> str:
    """A Markdown table plus the machine and command."""
    lines = [
        "| computation | us per call | ratio to calibration | reference (scipy) | goal | met |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for name, us, ratio, ref, goal in rows:
        ref_s = f"{ref:g} us" if ref is not None else "-"
        goal_s = f"<= {goal:g} us" if goal is not None else "-"
        met = "-" if goal is None else ("yes" if us <= goal else "no")
        lines.append(f"| {name} | {us:.1f} | {ratio:.4f} | {ref_s} | {goal_s} | {met} |")
    lines += [
        "",
        f"Calibration: a pure-Python loop of {CALIBRATION_N:,} float multiply-adds took"
        f" {unit:.0f} us in the same run; ratio = us per call / calibration us.",
        f"Machine: {os.cpu_count()} CPUs (nproc), {_cpu_model()},"
        f" Python {platform.python_version()}.",
        "Reference figures: fishtest's scipy-based code (reliability-performance.md B3).",
        f"Each figure is the median over {ROUNDS} rounds of the best of 3 timeit repeats.",
        f"Command: `{command_line()}`",
    ]
    return "\n".join(lines)


def write_doc(body: str) -> None:
    """Replace only the stats section of docs/benchmarks.md (create the file if absent)."""
    section = f"## Statistics\n\n{BEGIN}\n{body}\n{END}"
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = f"{head}{BEGIN}\n{body}\n{END}{tail}"
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    unit, rows = measure()
    body = render(unit, rows)
    print(body)
    if args.write:
        write_doc(body)


if __name__ == "__main__":
    main()
