"""A run's results over time, thinned: what its charts draw (LLR and Elo against games).

Neither the tasks nor the actions keep this: a task's stats are cumulative and
overwritten, so the order in which games arrived is lost. The run keeps the
points in its own column, `RunRecord.results_history`, apart from its args:
the args of an SPRT run change with every result, the history only when a
point is fixed, so a result update no longer re-encodes 64 points (measured on the fleet).

Only fixed points are stored. The latest point is the run's current totals and
LLR, derived when read, so it costs nothing to keep up to date. A point is
fixed when a result update lands at least `step` games past the last fixed
one (the first result always fixes one); the update that fixes it writes the
column in the same transaction as the results. The list stays small by
thinning: once it would reach MAX_POINTS every other point is dropped and the
spacing doubles. A run of any length therefore shows between MAX_POINTS / 2
and MAX_POINTS evenly spread points, the latest one included.

A stored point is a list `[games, wins, losses, draws, LL, LD, DD, WD, WW, llr]`
(`llr` is None without an SPRT). Pure functions of a `RunRecord`.
"""

from dataclasses import dataclass
from typing import Any

from arbiter.storage.records import RunRecord, evolve
from arbiter.storage.run_spec import RunSpec

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
    """The run with its current results fixed in its history when due."""
    return evolve(run, results_history=advanced(run, run.args))


def advanced(run: RunRecord, spec: RunSpec) -> dict[str, Any] | None:
    """The run's stored history after its current results, whose LLR is in `spec`
    (the run's, or its new one when the same update advances its SPRT state).

    The very object stored when no point is fixed and none forgotten, which is
    most updates: storage then leaves the column unwritten."""
    stored = run.results_history
    games = run.wins + run.losses + run.draws
    step, fixed = (FIRST_STEP, []) if stored is None else (int(stored["step"]), stored["points"])
    kept = fixed
    if kept and kept[-1][0] > games:
        # A purge took games away: forget what no longer stands, and let the
        # rule below fix the current totals if they are due.
        kept = [p for p in kept if p[0] <= games]
    if games > 0 and (not kept or games - kept[-1][0] >= step):
        kept = [*kept, _point(run, spec, games)]
        if len(kept) >= MAX_POINTS:  # the latest point makes one more when read
            kept, step = [*kept[:-1:2], kept[-1]], 2 * step
    return stored if kept is fixed else _history(step, kept)


def points(run: RunRecord) -> list[Point]:
    """The fixed points and then the latest one, oldest first (empty before any result)."""
    stored = run.results_history
    games = run.wins + run.losses + run.draws
    shown = [] if stored is None else [p for p in stored["points"] if p[0] <= games]
    if games > 0:
        # The latest point is the current totals (a fixed one at the same games
        # is the same point).
        if shown and shown[-1][0] == games:
            shown.pop()
        shown.append(_point(run, run.args, games))
    return [
        Point(int(p[0]), int(p[1]), int(p[2]), int(p[3]), _penta(p[4:9]), _llr(p[9])) for p in shown
    ]


def _history(step: int, fixed: list[list[Any]]) -> dict[str, Any]:
    return {"step": step, "points": fixed}


def _point(run: RunRecord, spec: RunSpec, games: int) -> list[Any]:
    sprt = spec.sprt
    llr = None if sprt is None else round(float(sprt["llr"]), 4)
    return [games, run.wins, run.losses, run.draws, *run.pentanomial, llr]


def _penta(values: list[Any]) -> tuple[int, int, int, int, int]:
    ll, ld, dd, wd, ww = (int(v) for v in values)
    return ll, ld, dd, wd, ww


def _llr(value: Any) -> float | None:
    return None if value is None else float(value)
