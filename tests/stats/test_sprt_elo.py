"""SPRT Elo (median-unbiased, Brownian): reference rows 20-24."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arbiter.stats import TwoBarrier, score_from_elo, sprt_bounds, sprt_elo
from arbiter.stats._math import normal_ppf
from arbiter.stats._pdf import mean_var, results_to_pdf
from arbiter.stats.sprt_elo import _guesses, _Model, _observed_point, _scores, _solve, _solve_near
from tests.stats.support import close

P4 = [39, 2226, 31451, 2412, 40]


@pytest.mark.parametrize(
    ("results", "elo0", "elo1", "model", "ldw", "expected"),
    [
        (P4, 0.764, 3.439, "normalized", None,
         (0.8651598534526277, 0.16827135251642789, 1.5405826879352602, 0.9919993674519018,
          2.162940869584568)),  # row 20
        (P4, 0.2, 0.9, "logistic", None,
         (0.8651827882599539, 0.1683070591217059, 1.5405993355073948, 0.9920016650631204,
          2.1625425800483593)),  # row 21
        ([1500, 4000, 1450], 0, 6, "BayesElo", None,
         (-2.326243144773433, -7.6979567099094375, 3.1029052107579442, 0.1993476849520115,
          -2.4516259587766775)),  # row 22
        ([10789, 19328, 33806, 19402, 10543], -3, 1, "logistic", [65804, 56553, 65388],
         (-0.9925365594552716, -3.488492131294004, 1.4885858954857965, 0.18803479310880994,
          2.1310678117940807)),  # row 23
        ([1200, 18000, 35000, 19500, 1500], 0, 2, "normalized", None,
         (4.6607449805609535, 2.1102910748524306, 7.200695419142211, 0.9998217504055473,
          18.844699201784373)),  # row 24
    ],
)  # fmt: skip
def test_rows_20_to_24(results, elo0, elo1, model, ldw, expected) -> None:  # type: ignore[no-untyped-def]
    est = sprt_elo(results, elo0, elo1, model, ldw=ldw)
    assert est.a == close(-2.9444389791664403)
    assert est.b == close(2.9444389791664403)
    got = (est.elo, est.ci[0], est.ci[1], est.los, est.llr)
    for value, want in zip(got, expected, strict=True):
        assert value == close(want)


def test_as_dict_keys() -> None:
    reply = sprt_elo(P4, 0.5, 2.5).as_dict()
    assert list(reply) == ["a", "b", "elo", "ci", "LOS", "LLR"]


def test_clamped_flag() -> None:
    assert sprt_elo([1200, 18000, 35000, 19500, 1500], 0, 2).clamped
    assert not sprt_elo(P4, 0.764, 3.439).clamped


def test_bounds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="below"):
        sprt_elo(P4, 2, 2)
    with pytest.raises(ValueError, match="elo_model"):
        sprt_elo(P4, 0, 2, "Glicko")


@settings(max_examples=200, deadline=None)
@given(
    results=st.lists(st.integers(0, 10**6), min_size=5, max_size=5).filter(lambda p: sum(p) >= 10),
    elo0=st.floats(-10, 10),
    width=st.floats(0.5, 10),
    model=st.sampled_from(["normalized", "logistic"]),
)
def test_search_from_the_guess_finds_the_wide_search_root(
    results: list[int], elo0: float, width: float, model: str
) -> None:
    """The short-bracket search ends where Brent on the whole interval does."""
    elo1 = elo0 + width
    samples, pdf = results_to_pdf(results)
    mu, var = mean_var(pdf)
    drift = _Model(*_scores(model, elo0, elo1, var, 5), var)
    a, b = sprt_bounds()
    t, y = _observed_point(samples * drift.drift(mu), samples, a, b)
    walk = TwoBarrier(a, b, drift.sigma(), t, y)

    def prob(elo: float) -> float:
        return walk.outcome_cdf(drift.drift(score_from_elo(elo)))

    centre = (elo0 + elo1) / 2
    bounds = (max(centre - 30 * width, -1000.0), min(centre + 30 * width, 1000.0))
    targets = (0.5, 0.975, 0.025)
    guesses = _guesses(drift, walk, [normal_ppf(p) for p in targets])
    for target, guess in zip(targets, guesses, strict=True):
        near = _solve_near(prob, target, guess, bounds)
        if near is not None:
            assert near == pytest.approx(_solve(prob, target, elo0, elo1), rel=1e-9, abs=1e-9)
