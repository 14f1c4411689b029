"""A run's results over time, thinned: what its charts draw (LLR and Elo against games).

Neither the tasks nor the actions keep this: a task's stats are cumulative and
overwritten, so the order in which games arrived is lost. Each result update
appends a point to `run.args["results_history"]` (written in the same
transaction as the results), and the list stays small by thinning: once it
holds more than MAX_POINTS points every other one is dropped and the spacing
doubles. A run of any length therefore keeps between MAX_POINTS / 2 and
MAX_POINTS evenly spread points plus the latest one.

A point is a list `[games, wins, losses, draws, LL, LD, DD, WD, WW, llr]`
(`llr` is None without an SPRT). Pure functions of a `RunRecord`.
"""

from dataclasses import dataclass
from typing import Any

from arbiter.storage.records import RunRecord, evolve

HISTORY_KEY = "results_history"
MAX_POINTS = 64
FIRST_STEP = 2  # games between points before any thinning (one pair)


@dataclass(frozen=True, slots=True)
class Point:
    games: int
    wins: int
    losses: int
    draws: int
    pentanomial: tuple[int, int, int, int, int]
    llr: float | None


def record(run: RunRecord) -> RunRecord:
    """The run with its current results appended to its history when due."""
    return evolve(run, args=recorded(run, run.args))


def recorded(run: RunRecord, args: dict[str, Any]) -> dict[str, Any]:
    """`args` (the run's, or new ones such as an advanced SPRT state) with the
    run's current results appended to their history when due: a result update
    makes its new run record once, from both (issue 19)."""
    games = run.wins + run.losses + run.draws
    stored = args.get(HISTORY_KEY) or {"step": FIRST_STEP, "points": []}
    step = int(stored["step"])
    # A purge can take games away: forget what no longer stands. Points are in
    # the order of their games, so when the last one stands they all do (every
    # result update passes here: the copy is the common case).
    stored_points = stored["points"]
    if not stored_points or stored_points[-1][0] <= games:
        kept = list(stored_points)
    else:
        kept = [p for p in stored_points if p[0] <= games]
    latest = _point(run, args, games)
    # The last point follows the latest results until it is `step` games past
    # the one before it; then it stays and the next update starts a new one.
    if kept and (kept[-1][0] == games or (len(kept) >= 2 and kept[-1][0] - kept[-2][0] < step)):
        kept[-1] = latest
    else:
        kept.append(latest)
    if len(kept) > MAX_POINTS:
        kept = [*kept[:-1:2], kept[-1]]
        step *= 2
    return {**args, HISTORY_KEY: {"step": step, "points": kept}}


def points(run: RunRecord) -> list[Point]:
    """The stored points, oldest first (empty for a run without results yet)."""
    stored = run.args.get(HISTORY_KEY)
    if not stored:
        return []
    return [
        Point(int(p[0]), int(p[1]), int(p[2]), int(p[3]), _penta(p[4:9]), _llr(p[9]))
        for p in stored["points"]
    ]


def _point(run: RunRecord, args: dict[str, Any], games: int) -> list[Any]:
    sprt = args.get("sprt")
    llr = None if sprt is None else round(float(sprt["llr"]), 4)
    return [games, run.wins, run.losses, run.draws, *run.pentanomial, llr]


def _penta(values: list[Any]) -> tuple[int, int, int, int, int]:
    ll, ld, dd, wd, ww = (int(v) for v in values)
    return ll, ld, dd, wd, ww


def _llr(value: Any) -> float | None:
    return None if value is None else float(value)
