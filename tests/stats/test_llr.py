"""Exact LLRs against reference §5.2 rows 1-11, and the solver against scipy."""

import math

import pytest
from scipy.optimize import brentq

from arbiter.stats import (
    llr,
    llr_bayeselo,
    llr_logistic,
    llr_logistic_approx,
    llr_normalized,
    llr_normalized_approx,
    sprt_bounds,
)
from arbiter.stats.llr import secular_root
from tests.stats.support import close

P1 = [1000, 2000, 3000, 2000, 1000]
P2 = [100, 2200, 5000, 2400, 120]
P3 = [10789, 19328, 33806, 19402, 10543]
P4 = [39, 2226, 31451, 2412, 40]
T1 = [1500, 4000, 1450]


def test_bounds_row_1() -> None:
    assert sprt_bounds(0.05, 0.05) == (-2.9444389791664403, 2.9444389791664403)


@pytest.mark.parametrize(
    ("function", "elo0", "elo1", "results", "expected"),
    [
        (llr_normalized, 0, 2, P1, -0.2982280628167609),  # row 2
        (llr_normalized, 0, 2, P2, 2.2902383890068525),  # row 3
        (llr_normalized_approx, 0, 2, P2, 2.2904928765613395),  # row 4
        (llr_logistic, 0, 2, P2, 3.7864993201314063),  # row 5
        (llr_logistic, -3, 1, P3, 2.1310678117940807),  # row 6
        (llr_normalized, -1.75, 0.25, P3, -0.6271679157328218),  # row 7
        (llr_normalized, 0.5, 2.5, P4, 2.3379000175366507),  # row 8
        (llr_logistic, 0, 5, T1, -3.38952442998475),  # row 9
        (llr_normalized, 0, 5, T1, -1.8240778705268095),  # row 10
        (llr_bayeselo, 0, 6, [591, 2163, 716], 2.994844556312522),  # row 11
    ],
)
def test_reference_rows(function, elo0, elo1, results, expected) -> None:  # type: ignore[no-untyped-def]
    assert function(elo0, elo1, results) == close(expected)


def test_dispatch_by_model() -> None:
    assert llr("normalized", 0, 2, P2) == llr_normalized(0, 2, P2)
    assert llr("logistic", 0, 2, P2) == llr_logistic(0, 2, P2)
    with pytest.raises(ValueError, match="elo_model"):
        llr("Glicko", 0, 2, P2)


def test_logistic_approximation_is_close_for_small_elo() -> None:
    assert llr_logistic_approx(-3, 1, P3) == pytest.approx(llr_logistic(-3, 1, P3), rel=1e-3)


def test_secular_root_matches_brentq() -> None:
    probs = [0.1, 0.2, 0.4, 0.2, 0.1]
    shifted = [a - 0.53 for a in (0, 0.25, 0.5, 0.75, 1)]

    def f(x: float) -> float:
        return sum(p * a / (1 + x * a) for p, a in zip(probs, shifted, strict=True))

    lo, hi = -1 / max(shifted), -1 / min(shifted)
    expected = brentq(f, lo + 1e-9, hi - 1e-9, xtol=1e-15)
    root = secular_root(probs, shifted)
    assert root is not None
    assert root == pytest.approx(expected, rel=1e-12)


def test_secular_root_without_sign_change() -> None:
    assert secular_root([0.5, 0.5], [0.1, 0.2]) is None


def test_bad_shapes_are_rejected() -> None:
    with pytest.raises(ValueError, match="3"):
        llr_logistic(0, 2, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="non-negative"):
        llr_logistic(0, 2, [1, -2, 3])
    with pytest.raises(ValueError, match="trinomial"):
        llr_bayeselo(0, 6, P1)


def test_bounds_validate() -> None:
    with pytest.raises(ValueError, match="alpha"):
        sprt_bounds(0.0, 0.05)
    lower, upper = sprt_bounds(0.01, 0.1)
    assert lower == math.log(0.1 / 0.99)
    assert upper == math.log(0.9 / 0.01)
