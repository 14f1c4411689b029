"""Exact LLRs against reference §5.2 rows 1-11, and the solver and LLRs against a scipy oracle."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
from arbiter.stats._pdf import empirical
from arbiter.stats.llr import (
    _mle_t_value_5,
    _mle_t_value_n,
    _power_sums,
    _power_sums_5,
    _tilt_log_ratio,
    _tilt_log_ratio_5,
    normalized_targets,
    secular_root,
)
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


# Property tests for the fast paths: an oracle written plainly here, with
# scipy's brentq to 1e-15, must agree with the Halley solver and its shortcuts.

SOLVER_SETTINGS = settings(max_examples=300, deadline=None)
finite_counts = st.lists(st.integers(0, 10**7), min_size=5, max_size=5).filter(
    lambda p: sum(p) >= 10
) | st.lists(st.integers(0, 10**7), min_size=3, max_size=3).filter(lambda p: sum(p) >= 10)
elo_bounds = st.tuples(st.floats(-20, 20), st.floats(0.5, 10)).map(lambda b: (b[0], b[0] + b[1]))


def _oracle_root(probs: list[float], shifted: list[float]) -> float | None:
    if max(shifted) <= 0 or min(shifted) >= 0:
        return None

    def f(x: float) -> float:
        return sum(p * a / (1 + x * a) for p, a in zip(probs, shifted, strict=True))

    lo, hi = -1 / max(shifted), -1 / min(shifted)
    width = hi - lo
    return float(brentq(f, lo + 1e-15 * width, hi - 1e-15 * width, xtol=1e-15, rtol=1e-15))


def _oracle_pdf(results: list[int]) -> tuple[float, list[float], list[float]]:
    counts = [n if n else 1e-3 for n in results]
    total = sum(counts)
    return total, [i / (len(counts) - 1) for i in range(len(counts))], [n / total for n in counts]


def _oracle_tilted(probs: list[float], shifted: list[float]) -> list[float]:
    x = _oracle_root(probs, shifted)
    return probs if x is None else [p / (1 + x * a) for p, a in zip(probs, shifted, strict=True)]


def _oracle_llr_logistic(elo0: float, elo1: float, results: list[int]) -> float:
    count, values, probs = _oracle_pdf(results)
    q0, q1 = (
        _oracle_tilted(probs, [v - 1 / (1 + 10 ** (-elo / 400)) for v in values])
        for elo in (elo0, elo1)
    )
    return count * sum(p * math.log(b / a) for p, a, b in zip(probs, q0, q1, strict=True))


def _oracle_t_value(values: list[float], probs: list[float], t: float) -> list[float]:
    q = [1 / len(values)] * len(values)
    for _ in range(10):
        mu = sum(qi * v for qi, v in zip(q, values, strict=True))
        sigma = math.sqrt(sum(qi * (v - mu) ** 2 for qi, v in zip(q, values, strict=True)))
        shifted = [v - 0.5 - t * sigma * (1 + ((mu - v) / sigma) ** 2) / 2 for v in values]
        if _oracle_root(probs, shifted) is None:
            break
        previous, q = q, _oracle_tilted(probs, shifted)
        if max(abs(u - w) for u, w in zip(previous, q, strict=True)) < 1e-9:
            break
    return q


def _oracle_llr_normalized(nelo0: float, nelo1: float, results: list[int]) -> float:
    count, values, probs = _oracle_pdf(results)
    scale = (math.sqrt(2) if len(results) == 5 else 1) / (800 / math.log(10))
    q0, q1 = (_oracle_t_value(values, probs, nelo * scale) for nelo in (nelo0, nelo1))
    return count * sum(p * math.log(b / a) for p, a, b in zip(probs, q0, q1, strict=True))


def _agrees(value: float, oracle: float) -> bool:
    return math.isclose(value, oracle, rel_tol=1e-9, abs_tol=1e-9)


@SOLVER_SETTINGS
@given(
    weights=st.lists(st.floats(1e-6, 1.0), min_size=2, max_size=7),
    centre=st.floats(1e-3, 1 - 1e-3),  # scores of |Elo| < 1200
    guess=st.floats(-1e3, 1e3),
)
def test_secular_root_matches_brentq_from_any_guess(
    weights: list[float], centre: float, guess: float
) -> None:
    probs = [w / sum(weights) for w in weights]
    shifted = [i / (len(probs) - 1) - centre for i in range(len(probs))]
    expected = _oracle_root(probs, shifted)
    for start in (0.0, guess):
        root = secular_root(probs, shifted, start)
        if expected is None:
            assert root is None
            continue
        assert root is not None
        scale = min(root + 1 / max(shifted), -1 / min(shifted) - root)  # distance to a pole
        assert abs(root - expected) <= 1e-12 * max(scale, abs(expected)) + 1e-300


@SOLVER_SETTINGS
@given(results=finite_counts, bounds=elo_bounds)
def test_llr_logistic_matches_plain_oracle(results: list[int], bounds: tuple[float, float]) -> None:
    assert _agrees(llr_logistic(*bounds, results), _oracle_llr_logistic(*bounds, results))


@SOLVER_SETTINGS
@given(results=finite_counts, bounds=elo_bounds | st.floats(0.5, 10).map(lambda w: (0.0, w)))
def test_llr_normalized_matches_plain_oracle(
    results: list[int], bounds: tuple[float, float]
) -> None:
    assert _agrees(llr_normalized(*bounds, results), _oracle_llr_normalized(*bounds, results))


# The pentanomial paths unrolled for speed must give the very floats of
# the general loops they replace, not merely close ones: the reference rows rest on
# the same operations in the same order.

pentanomial_counts = st.lists(st.integers(0, 10**7), min_size=5, max_size=5).filter(
    lambda p: sum(p) >= 10
)


@SOLVER_SETTINGS
@given(results=pentanomial_counts, nelo=st.floats(-10, 10))
def test_the_unrolled_t_value_mle_is_the_general_one_exactly(
    results: list[int], nelo: float
) -> None:
    _, values, probs = empirical(results)
    t, _ = normalized_targets(nelo, nelo, 5)
    assert _mle_t_value_5(values, probs, 0.5, t) == _mle_t_value_n(values, probs, 0.5, t)


@SOLVER_SETTINGS
@given(
    results=pentanomial_counts,
    tilts=st.lists(st.floats(-1.5, 1.5), min_size=2, max_size=2),
    centres=st.lists(st.floats(0.01, 0.99), min_size=2, max_size=2),
)
def test_the_unrolled_pentanomial_sums_are_the_general_ones_exactly(
    results: list[int], tilts: list[float], centres: list[float]
) -> None:
    _, values, probs = empirical(results)
    assert list(_power_sums_5(probs)) == _power_sums(probs, values)
    # Tilts that keep 1 + x·(v − s) positive on the support, as the solver's do.
    (x0, x1), (s0, s1) = tilts, centres
    c0, c1 = 1.0 - x0 * s0, 1.0 - x1 * s1
    if min(c0, c0 + x0, c1, c1 + x1) <= 0.0:
        return
    general = _tilt_log_ratio(probs, values, (c0, x0), (c1, x1))
    assert _tilt_log_ratio_5(probs, (c0, x0), (c1, x1)) == general
