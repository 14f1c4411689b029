"""Two-barrier Brownian outcome CDF: reference row 27 and internal consistency."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _two_sums(walk: TwoBarrier, mu: float) -> float:
    """The series as two sums (hit A by T, alive below y at T): the plain form."""
    s2, a, width = walk.sigma**2, walk.a, walk.b - walk.a
    gamma, y_rel = mu / s2, min(max(walk.y, a), walk.b) - a
    front = math.exp(gamma * a - mu * mu / (2 * s2) * walk.t)
    flux = alive = 0.0
    n = 1
    while True:
        k = n * math.pi / width
        if n > 1 and (k * k - (math.pi / width) ** 2) * s2 * walk.t / 2 > 45:
            break
        weight = math.sin(-k * a) * math.exp(-k * k * s2 * walk.t / 2)
        flux += weight * k / (k * k * s2 / 2 + mu * mu / (2 * s2))
        growth = math.exp(gamma * y_rel)
        integral = growth * (gamma * math.sin(k * y_rel) - k * math.cos(k * y_rel)) + k
        alive += weight * integral / (gamma * gamma + k * k)
        n += 1
    eventually = (
        walk.b / width
        if gamma == 0
        else math.expm1(-2 * gamma * walk.b)
        / (math.expm1(-2 * gamma * walk.b) - math.expm1(-2 * gamma * a))
    )
    return eventually - s2 / width * front * flux + 2 / width * front * alive


@settings(max_examples=300, deadline=None)
@given(
    sigma=st.floats(0.005, 0.2),
    t=st.floats(10, 1e6),
    y=st.floats(-4, 4),
    mu=st.floats(-0.01, 0.01),
)
def test_merged_series_equals_the_two_sums(sigma: float, t: float, y: float, mu: float) -> None:
    walk = TwoBarrier(A, B, sigma, t, y)
    if walk.use_siegmund(mu):
        return
    assert walk.exact(mu) == pytest.approx(_two_sums(walk, mu), rel=1e-9, abs=1e-12)
