"""Benchmark of the pure statistics: ours and the reference's, side by side.

Run: .venv/bin/python bench/bench_stats.py [--write] [--rounds N] [--reference GIT_DIR]

The machine is a noisy 2-core box, so every figure is also given as a ratio to
a fixed pure-Python calibration loop (10^5 float multiply-adds) timed in the
same run: the ratio is what to compare across machines and days. The
reference (fishtest's scipy-based server/fishtest/stats) is timed in the same
process on the same inputs, each round interleaved with ours, so the speed-up
column compares figures from one run. Its four files are read from a bare git
mirror with `git show` into a temporary directory at run time (never copied
into this repository); without the mirror or scipy only our figures are given.
Times are CPU time of the measuring thread (time.thread_time), so waiting for
a core other jobs hold is not counted; each figure is the median over rounds of
the best-of-repeats time. `--write` replaces the section between the stats
markers in docs/benchmarks.md.
"""

import argparse
import datetime
import importlib
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

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
from bench.lib.command import command_line

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- stats:begin -->", "<!-- stats:end -->"
CALIBRATION_N = 100_000
ROUNDS = 5
REFERENCE_MIRROR = "/work/.mirror/official-stockfish+fishtest/repo"
REFERENCE_FILES = ("LLRcalc.py", "brownian.py", "sprt.py", "stat_util.py")
# A 1M-game pentanomial run (500k pairs); the cost does not depend on N.
PENTA = [10789 * 2, 19328 * 2, 33806 * 2 + 31, 19402 * 2, 10543 * 2]
# The same run as the reference's result dict (its update_SPRT and SPRT_elo take one).
WINS = 2 * PENTA[4] + PENTA[3]
LOSSES = 2 * PENTA[0] + PENTA[1]
RESULTS = {
    "wins": WINS,
    "losses": LOSSES,
    "draws": 2 * sum(PENTA) - WINS - LOSSES,
    "pentanomial": PENTA,
}


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


Thunk = Callable[[], object]


@dataclass(frozen=True, slots=True)
class Case:
    """One computation: ours, the reference's equivalent (if any) and the issue's goal."""

    name: str
    ours: Thunk
    reference: Callable[[ModuleType, ModuleType], Thunk] | None
    goal_ratio: float | None
    goal_speedup: float | None
    goal_us: float | None = None


CASES = [
    Case("exact LLR, logistic (pentanomial)",
         lambda: llr_logistic(-3, 1, PENTA),
         lambda su, llr: lambda: llr.LLR_logistic(-3, 1, PENTA), 0.0023, 4.0),
    Case("exact LLR, normalized (pentanomial)",
         lambda: llr_normalized(0, 2, PENTA),
         lambda su, llr: lambda: llr.LLR_normalized(0, 2, PENTA), 0.0069, 4.0),
    Case("update_sprt (normalized LLR + overshoot)",
         lambda: update_sprt(new_sprt(0.05, 0.05, 0, 2), PENTA),
         lambda su, llr: lambda: su.update_SPRT(
             RESULTS, su.SPRT(0.05, 0.05, 0, 2, "normalized")), 0.0069, 4.0),
    Case("SPRT analytics: Elo, 95% CI, LOS, LLR (normalized)",
         lambda: sprt_elo(PENTA, 0, 2, "normalized"),
         lambda su, llr: lambda: su.SPRT_elo(RESULTS, elo0=0, elo1=2, elo_model="normalized"),
         0.07, 10.0),
    Case("fixed-games Elo, CI, LOS (pentanomial)",
         lambda: fixed_games_elo(PENTA),
         lambda su, llr: lambda: su.get_elo(PENTA), None, None),
    Case("chi-square residuals, 5,000 tasks / 500 workers", chi2_5000_tasks, None, None, None,
         10_000.0),
]  # fmt: skip


def load_reference(git_dir: str) -> tuple[ModuleType, ModuleType] | str:
    """(stat_util, LLRcalc) of the reference at the mirror's HEAD, or why not.

    The files are written to a temporary `fishtest/stats` package (its imports
    are package-relative), imported, and the directory removed again.
    """
    try:
        importlib.import_module("scipy")
    except ImportError:
        return "scipy is not installed"
    with tempfile.TemporaryDirectory(prefix="arbiter-ref-") as tmp:
        package = Path(tmp, "fishtest", "stats")
        package.mkdir(parents=True)
        Path(tmp, "fishtest", "__init__.py").write_text("")
        (package / "__init__.py").write_text("")
        for name in REFERENCE_FILES:
            shown = subprocess.run(
                ["git", "--git-dir", git_dir, "show", f"HEAD:server/fishtest/stats/{name}"],
                capture_output=True,
                text=True,
                check=False,
            )
            if shown.returncode != 0:
                return f"git show {name} from {git_dir} failed: {shown.stderr.strip()}"
            (package / name).write_text(shown.stdout)
        sys.path.insert(0, tmp)
        try:
            stat_util = importlib.import_module("fishtest.stats.stat_util")
            llr_calc = importlib.import_module("fishtest.stats.LLRcalc")
        finally:
            sys.path.remove(tmp)
    return stat_util, llr_calc


def reference_revision(git_dir: str) -> str:
    shown = subprocess.run(
        ["git", "--git-dir", git_dir, "log", "-1", "--format=%h %cs"],
        capture_output=True,
        text=True,
        check=False,
    )
    return shown.stdout.strip() or "unknown"


def _per_call_us(func: Thunk) -> float:
    timer = timeit.Timer(func, timer=time.thread_time)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=3, number=number)) / number * 1e6


@dataclass(frozen=True, slots=True)
class Row:
    """Medians over rounds, and the spread (min-max) of ours and the reference's ratios."""

    case: Case
    us: float
    ratio: float
    ratio_spread: tuple[float, float]
    ref_us: float | None
    ref_ratio: float | None
    ref_ratio_spread: tuple[float, float] | None


def measure(
    rounds: int, reference: tuple[ModuleType, ModuleType] | None
) -> tuple[float, tuple[float, float], list[Row]]:
    """Calibration median and spread, and one Row per case; each round runs everything once."""
    ref_thunks = {
        c.name: c.reference(*reference)
        for c in CASES
        if reference is not None and c.reference is not None
    }
    calib: list[float] = []
    ours: dict[str, list[tuple[float, float]]] = {c.name: [] for c in CASES}
    theirs: dict[str, list[tuple[float, float]]] = {name: [] for name in ref_thunks}
    for _ in range(rounds):
        unit = _per_call_us(calibration)
        calib.append(unit)
        for case in CASES:
            us = _per_call_us(case.ours)
            ours[case.name].append((us, us / unit))
            if case.name in ref_thunks:
                ref_us = _per_call_us(ref_thunks[case.name])
                theirs[case.name].append((ref_us, ref_us / unit))
    rows = []
    for case in CASES:
        us, ratio, spread = _summary(ours[case.name])
        ref = _summary(theirs[case.name]) if case.name in theirs else None
        rows.append(
            Row(
                case,
                us,
                ratio,
                spread,
                ref[0] if ref else None,
                ref[1] if ref else None,
                ref[2] if ref else None,
            )
        )
    return statistics.median(calib), (min(calib), max(calib)), rows


def _summary(samples: list[tuple[float, float]]) -> tuple[float, float, tuple[float, float]]:
    ratios = [r for _, r in samples]
    return (
        statistics.median(us for us, _ in samples),
        statistics.median(ratios),
        (
            min(ratios),
            max(ratios),
        ),
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _goal(case: Case) -> str:
    parts = []
    if case.goal_ratio is not None:
        parts.append(f"ratio <= {case.goal_ratio:g}")
    if case.goal_speedup is not None:
        parts.append(f">= {case.goal_speedup:g}x")
    if case.goal_us is not None:
        parts.append(f"<= {case.goal_us:g} us")
    return ", ".join(parts) or "-"


def _met(row: Row) -> str:
    case = row.case
    if case.goal_us is not None:
        return "yes" if row.us <= case.goal_us else "no"
    if case.goal_ratio is None:
        return "-"
    met = row.ratio <= case.goal_ratio
    if case.goal_speedup is not None and row.ref_ratio is not None:
        met = met and row.ref_ratio / row.ratio >= case.goal_speedup
    return "yes" if met else "no"


def _spread(spread: tuple[float, float] | None) -> str:
    return "-" if spread is None else f"{spread[0]:.4f}-{spread[1]:.4f}"


def render(
    unit: float, unit_spread: tuple[float, float], rows: list[Row], rounds: int, source: str
) -> str:
    """A Markdown table plus the machine, the reference's revision and the command."""
    lines = [
        "| computation | ours: us per call | ours: ratio (spread) | reference: us per call"
        " | reference: ratio (spread) | speed-up, same run | goal | met |",
        "|---|---:|---:|---:|---:|---:|---|:---:|",
    ]
    for row in rows:
        has_ref = row.ref_us is not None and row.ref_ratio is not None
        ref_us = f"{row.ref_us:.1f}" if has_ref else "-"
        ref_ratio = f"{row.ref_ratio:.4f} ({_spread(row.ref_ratio_spread)})" if has_ref else "-"
        speedup = f"{row.ref_ratio / row.ratio:.1f}x" if has_ref else "-"  # type: ignore[operator]
        lines.append(
            f"| {row.case.name} | {row.us:.1f} | {row.ratio:.4f} ({_spread(row.ratio_spread)})"
            f" | {ref_us} | {ref_ratio} | {speedup} | {_goal(row.case)} | {_met(row)} |"
        )
    lines += [
        "",
        f"Calibration: a pure-Python loop of {CALIBRATION_N:,} float multiply-adds took"
        f" {unit:.0f} us (median; {unit_spread[0]:.0f}-{unit_spread[1]:.0f} us over the rounds)"
        " in the same run; ratio = us per call / calibration us of the same round.",
        f"Machine: {os.cpu_count()} CPUs (nproc), {_cpu_model()},"
        f" Python {platform.python_version()};"
        f" measured on {datetime.date.today().isoformat()}.",
        f"Reference: {source}.",
        f"Each figure is the median over {rounds} rounds of the best of 3 timeit repeats of"
        " thread CPU time; the spread is the lowest and highest ratio over the rounds.",
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
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"default {ROUNDS}")
    parser.add_argument(
        "--reference",
        default=REFERENCE_MIRROR,
        metavar="GIT_DIR",
        help=f"bare git mirror of fishtest (default {REFERENCE_MIRROR})",
    )
    parser.add_argument("--no-reference", action="store_true", help="time ours only")
    args = parser.parse_args()
    reference = None if args.no_reference else load_reference(args.reference)
    if isinstance(reference, str):
        print(f"reference not timed: {reference}", file=sys.stderr)
        source = f"not timed ({reference})"
        reference = None
    elif reference is None:
        source = "not timed (--no-reference)"
    else:
        source = (
            f"fishtest server/fishtest/stats at {reference_revision(args.reference)}"
            " (scipy-based), loaded from the git mirror at run time, timed in the same"
            " process on the same inputs, each round interleaved with ours;"
            " speed-up = reference ratio / our ratio"
        )
    unit, unit_spread, rows = measure(args.rounds, reference)
    body = render(unit, unit_spread, rows, args.rounds, source)
    print(body)
    if args.write:
        write_doc(body)


if __name__ == "__main__":
    main()
