"""SPRT bounds in every Elo model and the RMS bias, against the reference's
values for one run (computed with the reference's statistics code)."""

import math

import pytest

from arbiter.stats.elo import bayeselo_to_elo
from arbiter.stats.models import (
    bounds_in_models,
    elo_to_bayeselo,
    rms_bias,
    spread_of,
)

LDW = [3100, 10000, 3300]
PENTANOMIAL = [100, 2000, 4000, 2100, 120]


@pytest.mark.parametrize(
    ("elo_model", "elo", "expected"),
    [
        ("logistic", 2.0, (2.0, 3.656705, 3.183865, 0.5028782)),
        ("normalized", 2.0, (1.093872, 2.0, 1.988516, 0.5015742)),
        ("BayesElo", 3.0, (1.884088, 3.444781, 3.0, 0.50271139)),
        ("normalized", -1.75, (-0.957138, -1.75, -1.739942, 0.49862257)),
    ],
)
def test_a_bound_in_every_model_as_the_reference(
    elo_model: str, elo: float, expected: tuple[float, float, float, float]
) -> None:
    spread = spread_of(LDW, PENTANOMIAL)
    bound, _ = bounds_in_models(elo_model, elo, elo + 1.0, spread)
    found = (bound.logistic, bound.normalized, bound.bayeselo, bound.score)
    assert found == pytest.approx(expected, abs=2e-6)


def test_without_pairs_the_single_games_give_the_spread() -> None:
    spread = spread_of(LDW, None)
    assert spread.pentanomial_variance is None
    assert spread.sigma == pytest.approx(math.sqrt(spread.trinomial_variance))
    assert rms_bias(spread) is None


def test_the_rms_bias_as_the_reference() -> None:
    found = rms_bias(spread_of(LDW, PENTANOMIAL))
    assert found is not None
    assert found.variance_ratio == pytest.approx(0.7668315009167311, rel=1e-9)
    assert found.variance_difference == pytest.approx(0.02273947698897287, rel=1e-9)
    assert found.bias == pytest.approx(0.15079614381333784, rel=1e-9)
    assert found.elo == pytest.approx(108.14637601845133, rel=1e-9)


def test_pairs_that_vary_more_than_games_have_no_bias() -> None:
    found = rms_bias(spread_of([10, 0, 10], [10, 0, 0, 0, 10]))
    assert found is not None
    assert found.variance_difference < 0
    assert (found.bias, found.elo) == (0.0, 0.0)


def test_bayeselo_and_logistic_elo_convert_both_ways() -> None:
    draw_ratio = 0.6
    belo = elo_to_bayeselo(5.0, draw_ratio)
    p_win = 1 / (1 + 10 ** (-5.0 / 400)) - draw_ratio / 2
    p_loss = 1 - draw_ratio - p_win
    drawelo = 200 * math.log10((1 - p_loss) / p_loss * (1 - p_win) / p_win)
    assert bayeselo_to_elo(belo, drawelo) == pytest.approx(5.0)
    assert math.isnan(elo_to_bayeselo(400.0, 0.99))  # no such probabilities
    with pytest.raises(ValueError, match="draw ratio"):
        elo_to_bayeselo(1.0, -0.1)
