"""Two-barrier Brownian outcome CDF: reference row 27 and internal consistency."""

import math

import pytest

from arbiter.stats import TwoBarrier, outcome_cdf, sprt_bounds
from tests.stats.support import close

A, B = sprt_bounds()


def test_row_27() -> None:
    assert outcome_cdf(A, B, 0.001, 0.05, t=1000, y=0.5) == close(0.3756648480815416)


def test_exact_and_siegmund_agree_where_both_are_good() -> None:
    walk = TwoBarrier(A, B, 0.05, 1000, 0.5)
    assert walk.siegmund(0.001) == pytest.approx(walk.exact(0.001), rel=1e-6)


def test_cdf_is_monotone_in_drift_and_bounded() -> None:
    walk = TwoBarrier(A, B, 0.02, 5000, 1.0)
    values = [walk.outcome_cdf(mu / 1e4) for mu in range(-20, 21)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert values == sorted(values, reverse=True)


def test_clamped_point_at_lower_barrier_is_probability_of_earlier_fail() -> None:
    walk = TwoBarrier(A, B, 0.05, 2000, A)
    zero_drift = walk.exact(0.0)
    assert 0.0 < zero_drift < B / (B - A)
    assert math.isclose(TwoBarrier(A, B, 0.05, 1e9, A).exact(0.0), B / (B - A), rel_tol=1e-9)


def test_rejects_bad_barriers() -> None:
    with pytest.raises(ValueError, match="a < 0 < b"):
        TwoBarrier(1.0, 2.0, 0.1, 1.0, 0.0)
