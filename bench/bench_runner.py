"""Benchmark of the match runner: its own overhead at 1,000 nodes per move.

Run: .venv/bin/python bench/bench_runner.py [--pairs N] [--write]

Debian's Stockfish plays game pairs at `N=1000` from the shipped opening book
with the reference adjudication, through the real runner (`Match`). A game's
duration is split into engine thinking (from writing `go` to reading
`bestmove`) and everything else: the runner's overhead (refereeing with
python-chess, clocks, adjudication, starting each game, moving data through
the pipes). The goal is an overhead under 10% of a game's duration.

Two baselines are measured in the same run: a bare UCI loop that replays the
same games' positions to the same engine with nothing but the pipe traffic
(the least any Python driver pays per move), and the pure-Python calibration
loop of bench_stats.py (10^5 float multiply-adds), so the per-move figure can
be compared across machines. `--write` replaces the section between the
runner markers in docs/benchmarks.md.
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import timeit
from dataclasses import dataclass
from pathlib import Path

import chess

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arbiter.worker.books import openings_for_task, read_book
from arbiter.worker.match import (
    REFERENCE_RULES,
    EngineSetup,
    GameRecord,
    GameRules,
    Match,
    MatchSetup,
    PairJob,
    UciEngine,
    parse_time_control,
)
from bench.lib.command import command_line

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BOOK = ROOT / "src" / "arbiter" / "data" / "books" / "arbiter-openings-v1.epd"
BEGIN, END = "<!-- runner:begin -->", "<!-- runner:end -->"
STOCKFISH = "/usr/games/stockfish"
NODES = 1000
GOAL = 0.10
CALIBRATION_N = 100_000


@dataclass(frozen=True)
class Figures:
    slots: int
    games: int
    moves: int
    seconds: float  # sum of game durations
    thinking: float  # sum of go -> bestmove

    @property
    def overhead(self) -> float:
        return (self.seconds - self.thinking) / self.seconds

    @property
    def overhead_per_move_us(self) -> float:
        return (self.seconds - self.thinking) / self.moves * 1e6


def calibration() -> None:
    acc = 0.0
    for i in range(CALIBRATION_N):
        acc = acc * 0.999999 + i
    if acc < 0:
        raise AssertionError


def calibration_us() -> float:
    return min(timeit.repeat(calibration, number=1, repeat=5)) * 1e6


def play(pairs: int, slots: int, cwd: Path) -> tuple[Figures, list[GameRecord]]:
    tc = parse_time_control(f"N={NODES}")
    options = {"Threads": "1", "Hash": "16"}
    setup = MatchSetup(
        new=EngineSetup("New", (STOCKFISH,), cwd, options, tc),
        base=EngineSetup("Base", (STOCKFISH,), cwd, options, tc),
        games_at_once=slots,
        rules=GameRules(REFERENCE_RULES),
    )
    openings = openings_for_task(read_book(BOOK, 16), "0" * 24, 0, pairs + slots)
    match = Match(setup)
    try:
        # One pair per slot first, unmeasured: engine start-up is not per game.
        warm = [PairJob(i, openings[i]) for i in range(slots)]
        list(match.play(warm, threading.Event()))
        jobs = [PairJob(i, openings[slots + i]) for i in range(pairs)]
        records = [g for o in match.play(jobs, threading.Event()) for g in o.games]
    finally:
        match.close()
    figures = Figures(
        slots=slots,
        games=len(records),
        moves=sum(len(g.moves) for g in records),
        seconds=sum(g.duration for g in records),
        thinking=sum(g.thinking for g in records),
    )
    return figures, records


def bare_loop(records: list[GameRecord], cwd: Path) -> Figures:
    """The same positions, driven with nothing but the UCI pipe traffic."""
    engine = UciEngine((STOCKFISH,), cwd, "bare")
    engine.start()
    engine.configure({"Threads": "1", "Hash": "16"})
    seconds = thinking = 0.0
    moves = 0
    try:
        for record in records:
            start = (
                "startpos"
                if record.opening.fen == chess.STARTING_FEN
                else f"fen {record.opening.fen}"
            )
            played = list(record.opening.moves)
            began = time.monotonic()
            for move in record.moves:
                position = (
                    f"position {start} moves {' '.join(played)}" if played else f"position {start}"
                )
                found = engine.search(position, f"go nodes {NODES}", 60.0, None)
                thinking += found.elapsed
                played.append(move.uci)
                moves += 1
            seconds += time.monotonic() - began
    finally:
        engine.quit()
    return Figures(0, len(records), moves, seconds, thinking)


HEADER = (
    "measurement", "games", "moves", "ms per game", "engine thinking", "runner overhead",
    "overhead per move", "ratio to bare loop", "ratio to calibration", "goal", "met",
)  # fmt: skip


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _cells(name: str, run: Figures, bare: Figures, calibration: float) -> list[str]:
    per_move = run.overhead_per_move_us
    return [
        name,
        str(run.games),
        str(run.moves),
        f"{run.seconds / run.games * 1000:.0f}",
        f"{1 - run.overhead:.1%}",
        f"{run.overhead:.1%}",
        f"{per_move:.0f} us",
        f"{per_move / bare.overhead_per_move_us:.2f}",
        f"{per_move / calibration:.4f}",
    ]


def table(runs: list[Figures], bare: Figures, calibration: float) -> str:
    lines = [_row(list(HEADER)), "|---|" + "---:|" * 9 + ":---:|"]
    for run in runs:
        name = f"runner, {run.slots} game{'s' if run.slots > 1 else ''} at once"
        met = "yes" if run.overhead < GOAL else "no"
        lines.append(_row([*_cells(name, run, bare, calibration), "< 10%", met]))
    lines.append(_row([*_cells("bare UCI loop (baseline)", bare, bare, calibration), "-", "-"]))
    return "\n".join(lines)


def report(runs: list[Figures], bare: Figures, calibration: float, pairs: int) -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    notes = (
        f"Stockfish ({STOCKFISH}) at N={NODES} nodes per move, Hash 16, 1 thread; {pairs} pairs "
        "per row from the shipped book (arbiter-openings-v1.epd), reference adjudication; "
        "engines warmed up first.",
        "Engine thinking is the time from writing `go` to reading `bestmove`; the runner's "
        "overhead is the rest of each game (refereeing with python-chess, clocks, adjudication, "
        "`ucinewgame`/`isready` before the game, the pipes).",
        "The bare UCI loop replays the same positions with nothing but the pipe traffic: the "
        "least a Python driver pays per move. Calibration: 10^5 float multiply-adds took "
        f"{calibration:.0f} us in the same run.",
        f"Machine: {os.cpu_count()} CPUs (nproc), {cpu}, Python {platform.python_version()};"
        f" measured on {datetime.date.today().isoformat()}.",
        f"Command: `{command_line()}`",
    )
    return "\n".join([table(runs, bare, calibration), "", *notes])


def write(section: str) -> None:
    text = DOC.read_text()
    block = f"{BEGIN}\n{section}\n{END}"
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Match runner\n\n" + block + "\n"
    DOC.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    cwd = Path(tempfile.mkdtemp(prefix="bench-runner-"))  # the engines' working directory
    calibration = calibration_us()
    runs = []
    records: list[GameRecord] = []
    for slots in (1, 2):
        figures, played = play(args.pairs, slots, cwd)
        runs.append(figures)
        records = records or played
    bare = bare_loop(records, cwd)
    section = report(runs, bare, statistics.fmean([calibration, calibration_us()]), args.pairs)
    print(section)
    if args.write:
        write(section)


if __name__ == "__main__":
    main()
