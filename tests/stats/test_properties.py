"""Property tests: robustness on any counts, monotonicity, colour symmetry."""

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from arbiter.stats import (
    calc_elo,
    fixed_games_elo,
    llr_logistic,
    llr_normalized,
    nelo_summary,
    new_sprt,
    sprt_elo,
    update_sprt,
)

SETTINGS = settings(max_examples=200, deadline=None)
count = st.one_of(st.integers(0, 10**9), st.sampled_from([0, 1, 10**9]))
penta = st.lists(count, min_size=5, max_size=5).filter(lambda p: sum(p) > 0)
tri = st.lists(count, min_size=3, max_size=3).filter(lambda p: sum(p) > 0)
small_penta = st.lists(st.integers(1, 5000), min_size=5, max_size=5)
bounds = st.tuples(st.floats(-10, 10), st.floats(0.5, 10)).map(lambda b: (b[0], b[0] + b[1]))


@SETTINGS
@given(results=st.one_of(penta, tri), b=bounds)
def test_no_exception_on_any_counts(results: list[int], b: tuple[float, float]) -> None:
    for value in (
        llr_logistic(*b, results),
        llr_normalized(*b, results),
        fixed_games_elo(results).elo,
        update_sprt(new_sprt(elo0=b[0], elo1=b[1]), results)["llr"],
    ):
        assert math.isfinite(value)
    for model in ("normalized", "logistic"):
        est = sprt_elo(results, *b, model)
        assert all(math.isfinite(v) for v in (est.elo, est.los, *est.ci))
        assert 0.0 <= est.los <= 1.0
    if len(results) == 5:
        assert math.isfinite(nelo_summary(results).nelo)


@SETTINGS
@given(results=penta, b=bounds)
def test_calc_elo_answers_a_sound_estimate_on_any_counts(
    results: list[int], b: tuple[float, float]
) -> None:
    """Not only "no exception": every number is finite, LOS a probability, the
    interval ordered around the estimate, the SPRT bounds on either side of 0,
    and the same counts give the same answer whether or not bounds are asked."""
    assume(2 * sum(results) <= 2**32)
    elo0, elo1 = b[0], min(b[1], 10.0)
    assume(elo1 >= elo0 + 0.5)
    keys = ("LL", "LD", "DDWL", "WD", "WW")
    counts = {k: str(v) for k, v in zip(keys, results, strict=True)}
    reply = calc_elo(counts | {"elo0": repr(elo0), "elo1": repr(elo1)})
    assert set(reply) == {"a", "b", "elo", "ci", "LOS", "LLR"}
    low, high = reply["ci"]  # type: ignore[misc]
    numbers = [reply[k] for k in ("a", "b", "elo", "LOS", "LLR")] + [low, high]
    assert all(isinstance(v, float) and math.isfinite(v) for v in numbers), reply
    assert 0.0 <= reply["LOS"] <= 1.0  # type: ignore[operator]
    assert low <= reply["elo"] <= high, reply  # type: ignore[operator]
    assert reply["a"] < 0.0 < reply["b"], reply  # type: ignore[operator]
    fixed = calc_elo(counts)
    assert set(fixed) == {"elo", "ci", "LOS"}
    estimate = fixed_games_elo(results)
    assert fixed == {"elo": estimate.elo, "ci": list(estimate.ci), "LOS": estimate.los}
    assert 0.0 <= fixed["LOS"] <= 1.0  # type: ignore[operator]


@SETTINGS
@given(results=small_penta, b=bounds)
def test_llr_increases_with_wins(results: list[int], b: tuple[float, float]) -> None:
    more_wins = [*results[:4], results[4] + 50]
    assert llr_logistic(*b, more_wins) > llr_logistic(*b, results)
    assert llr_normalized(*b, more_wins) > llr_normalized(*b, results)


@SETTINGS
@given(results=small_penta, b=bounds)
def test_colour_swap_mirrors(results: list[int], b: tuple[float, float]) -> None:
    mirrored = results[::-1]
    neg = (-b[1], -b[0])
    assert llr_logistic(*neg, mirrored) == _approx(-llr_logistic(*b, results))
    assert llr_normalized(*neg, mirrored) == _approx(-llr_normalized(*b, results))
    est, mir = fixed_games_elo(results), fixed_games_elo(mirrored)
    assert mir.elo == _approx(-est.elo)
    assert mir.los == _approx(1.0 - est.los)
    s, m = sprt_elo(results, *b, "logistic"), sprt_elo(mirrored, *neg, "logistic")
    assert m.elo == _approx(-s.elo, 1e-6)
    assert m.ci[0] == _approx(-s.ci[1], 1e-6)


def _approx(value: float, tol: float = 1e-7) -> object:
    return pytest.approx(value, rel=tol, abs=tol)
