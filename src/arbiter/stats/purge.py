"""Per-worker chi-square residuals and the purge decision (reference §5.1, last bullet).

Each worker contributes one row [wins, losses, draws] (pentanomial runs use
pairs: [WW+WD, LL+LD, DD+WL]) of a contingency table. A worker whose results
differ from the others by more than chance gets a large residual; a purge
removes the worst such worker, one at a time (Fishtest issue #727's lesson: purging
every yellow worker at once over-purges long tests).
"""

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from arbiter.stats._math import chi2_sf, normal_isf

CRASH_RESIDUAL = 10.0
MIN_EXPECTED = 5.0

Row = tuple[float, float, float]


def worker_row(wins: int, losses: int, draws: int, pentanomial: Sequence[int] | None) -> Row:
    """A task's row: [W, L, D] games, or [WW+WD, LL+LD, DD+WL] pairs when known."""
    if pentanomial is not None:
        p = pentanomial
        return float(p[4] + p[3]), float(p[0] + p[1]), float(p[2])
    return float(wins), float(losses), float(draws)


def aggregate_rows(tasks: Iterable[tuple[str, Row]]) -> dict[str, list[float]]:
    """Sum task rows per worker key, skipping empty ones."""
    rows: dict[str, list[float]] = {}
    for key, (first, second, third) in tasks:
        if first == second == third == 0:
            continue
        acc = rows.get(key)
        if acc is None:
            rows[key] = [first, second, third]
        else:
            acc[0] += first
            acc[1] += second
            acc[2] += third
    return rows


@dataclass(frozen=True, slots=True)
class Chi2Result:
    """χ² of the table, its dof and p-value, and each kept worker's residual z."""

    chi2: float = 0.0
    dof: int = 0
    p: float = 1.0
    residual: dict[str, float] = field(default_factory=dict)
    excluded: frozenset[str] = frozenset()


def _trim(
    rows: dict[str, Sequence[float]], totals: Mapping[str, float]
) -> tuple[dict[str, Sequence[float]], list[int]]:
    """Drop workers with an expected cell ≤ 5, repeatedly, since removals change the rest.

    A row's smallest expected cell is its total times the smallest column total
    over the grand total, so one bound per pass decides every row (a run can
    have thousands of workers; this runs on their first view).
    """
    while rows:
        sums = [sum(r[j] for r in rows.values()) for j in range(3)]
        cols = [j for j in range(3) if sums[j] > 0]
        if len(cols) < 2:
            return rows, cols
        grand = sum(sums[j] for j in cols)
        smallest = min(sums[j] for j in cols)
        kept = {k: r for k, r in rows.items() if totals[k] * smallest / grand > MIN_EXPECTED}
        if len(kept) == len(rows):
            return rows, cols
        rows = kept
    return rows, []


def chi2_residuals(rows: Mapping[str, Sequence[float]], exclude: Iterable[str] = ()) -> Chi2Result:
    """χ² test of homogeneity across workers and per-worker residuals.

    Residual z = Φ⁻¹(1 − Q) where Q is the χ²(cols−1) survival of the worker's
    row χ² divided by (1 − row total/grand total), floored at 0. Counts are
    never negative.
    """
    skip = set(exclude)
    table = {k: r for k, r in rows.items() if k not in skip}
    totals = {k: r[0] + r[1] + r[2] for k, r in table.items()}
    kept, cols = _trim(table, totals)
    excluded = frozenset(table) - frozenset(kept)
    if len(kept) < 2 or len(cols) < 2:
        return Chi2Result(excluded=excluded)
    dof = (len(kept) - 1) * (len(cols) - 1)
    col_sums = [sum(r[j] for r in kept.values()) for j in cols]
    grand = sum(col_sums)
    shares = [(j, c / grand) for j, c in zip(cols, col_sums, strict=True)]
    row_dof = len(cols) - 1
    total, residual = 0.0, {}
    for key, row in kept.items():
        row_total = totals[key]
        row_chi2 = 0.0
        for j, share in shares:
            expected = row_total * share
            row_chi2 += (row[j] - expected) ** 2 / expected
        total += row_chi2
        tail = chi2_sf(row_chi2 / (1.0 - row_total / grand), row_dof)
        residual[key] = _residual(tail)
    return Chi2Result(total, dof, chi2_sf(total, dof), residual, excluded)


def _residual(tail: float) -> float:
    """z = Φ⁻¹(1 − tail), floored at 0: a row exactly as expected (tail 1) is 0,
    a row beyond all doubt (tail 0) infinite."""
    if tail >= 0.5:
        return 0.0
    return normal_isf(tail) if tail > 0.0 else math.inf


@functools.lru_cache(maxsize=256)
def residual_thresholds(rows: int) -> tuple[float, float]:
    """(z95, z99) = Φ⁻¹(1 − 0.05/rows), Φ⁻¹(1 − 0.01/rows): Bonferroni over workers.
    Cached: a run page colours every task by the same run's count."""
    n = max(rows, 1)
    return normal_isf(0.05 / n), normal_isf(0.01 / n)


def residual_color(residual: float, rows: int) -> str:
    """green up to z95, yellow up to z99, red beyond."""
    z95, z99 = residual_thresholds(rows)
    if residual > z99:
        return "red"
    if residual > z95:
        return "yellow"
    return "green"


def crash_or_time(games: int, crashes: int, time_losses: int) -> bool:
    """A task is bad outright with > 3 crashes, or > 10% time losses over > 20 games."""
    return crashes > 3 or (games > 20 and time_losses > 0.1 * games)


def bad_workers(
    rows: Mapping[str, Sequence[float]],
    p: float = 0.001,
    res: float = 7.0,
    iters: int = 1,
) -> set[str]:
    """Workers to purge: up to `iters` times, the single worst one if the table is
    significant (p-value < p) or its residual exceeds `res`."""
    bad: set[str] = set()
    for _ in range(iters):
        result = chi2_residuals(rows, exclude=bad)
        candidates = {k: r for k, r in result.residual.items() if result.p < p or r > res}
        if not candidates:
            break
        bad.add(max(candidates, key=lambda k: candidates[k]))
    return bad
