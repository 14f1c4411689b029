"""Chi-square residuals against scipy and the one-worst-worker purge."""

import math
import random

import pytest

from arbiter.stats import (
    aggregate_rows,
    bad_workers,
    chi2_residuals,
    crash_or_time,
    residual_color,
    residual_thresholds,
    worker_row,
)

scipy_stats = pytest.importorskip("scipy.stats")


def _fleet(n: int, seed: int = 3) -> dict[str, list[float]]:
    rng = random.Random(seed)
    rows = {}
    for i in range(n):
        games = rng.randint(200, 400)
        w = sum(rng.random() < 0.3 for _ in range(games))
        l_ = sum(rng.random() < 0.3 for _ in range(games - w))
        rows[f"w{i}"] = [float(w), float(l_), float(games - w - l_)]
    return rows


def test_matches_scipy_contingency() -> None:
    rows = _fleet(40)
    result = chi2_residuals(rows)
    chi2, p, dof, expected = scipy_stats.chi2_contingency(list(rows.values()), correction=False)
    assert result.chi2 == pytest.approx(chi2, rel=1e-10)
    assert result.dof == dof
    assert result.p == pytest.approx(p, rel=1e-9)
    key, row = "w7", rows["w7"]
    exp = expected[7]
    row_chi2 = sum((o - e) ** 2 / e for o, e in zip(row, exp, strict=True))
    adjusted = row_chi2 / (1 - sum(row) / sum(map(sum, rows.values())))
    z = max(scipy_stats.norm.isf(scipy_stats.chi2.sf(adjusted, 2)), 0.0)
    assert result.residual[key] == pytest.approx(z, rel=1e-9, abs=1e-12)


def test_cheater_is_purged_first() -> None:
    rows = _fleet(30)
    rows["cheat"] = [250.0, 20.0, 30.0]
    assert bad_workers(rows) == {"cheat"}
    assert residual_color(chi2_residuals(rows).residual["cheat"], len(rows)) == "red"
    assert len(bad_workers(rows, iters=3)) <= 3


def test_honest_fleet_keeps_everyone() -> None:
    assert bad_workers(_fleet(30, seed=11), p=1e-9, res=100.0) == set()


def test_small_workers_are_excluded() -> None:
    rows = _fleet(10)
    rows["tiny"] = [1.0, 0.0, 1.0]
    result = chi2_residuals(rows)
    assert "tiny" in result.excluded
    assert "tiny" not in result.residual


def test_degenerate_tables() -> None:
    assert chi2_residuals({}).dof == 0
    assert chi2_residuals({"a": [10, 10, 10]}).p == 1.0
    assert chi2_residuals({"a": [100, 0, 0], "b": [100, 0, 0]}).dof == 0


def test_workers_with_exactly_the_expected_results_have_no_residual() -> None:
    """Identical rows fit the table exactly (tail 1): a residual of 0, not an error."""
    result = chi2_residuals({"a": [30, 30, 40], "b": [30, 30, 40], "c": [60, 60, 80]})
    assert result.residual == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert result.chi2 == 0.0


def test_rows_and_aggregation() -> None:
    assert worker_row(5, 3, 2, None) == (5.0, 3.0, 2.0)
    assert worker_row(5, 3, 2, [1, 2, 3, 4, 5]) == (9.0, 3.0, 3.0)
    rows = aggregate_rows([("a", (1.0, 2.0, 3.0)), ("a", (1.0, 0.0, 0.0)), ("b", (0.0, 0.0, 0.0))])
    assert rows == {"a": [2.0, 2.0, 3.0]}


def test_thresholds_and_colors() -> None:
    z95, z99 = residual_thresholds(10)
    assert z95 == pytest.approx(scipy_stats.norm.ppf(1 - 0.005), rel=1e-12)
    assert z99 == pytest.approx(scipy_stats.norm.ppf(1 - 0.001), rel=1e-12)
    assert residual_color(0.5, 10) == "green"
    assert residual_color((z95 + z99) / 2, 10) == "yellow"
    assert residual_color(math.inf, 10) == "red"


def test_crash_or_time() -> None:
    assert crash_or_time(10, 4, 0)
    assert crash_or_time(30, 0, 4)
    assert not crash_or_time(20, 3, 10)
    assert not crash_or_time(30, 0, 3)
