"""SPRT pass probability and expected length (Brownian approximation)."""

import math

import pytest

from arbiter.stats.elo import elo_from_score
from arbiter.stats.sprt_forecast import (
    model_forecast,
    model_table,
    sprt_forecast,
    sprt_model,
)


@pytest.mark.parametrize(("elo0", "elo1"), [(0.0, 2.0), (0.5, 2.5), (-1.75, 0.25)])
@pytest.mark.parametrize(("alpha", "beta"), [(0.05, 0.05), (0.01, 0.1)])
def test_error_rates_hold_at_the_bounds(
    elo0: float, elo1: float, alpha: float, beta: float
) -> None:
    at_h0 = sprt_forecast(elo0, elo1, elo0, alpha=alpha, beta=beta)
    at_h1 = sprt_forecast(elo0, elo1, elo1, alpha=alpha, beta=beta)
    assert at_h0.pass_probability == pytest.approx(alpha, rel=1e-9)
    assert at_h1.pass_probability == pytest.approx(1 - beta, rel=1e-9)


def test_the_midpoint_is_a_coin_flip_and_the_longest_test() -> None:
    middle = sprt_forecast(0.0, 2.0, 1.0)
    assert middle.pass_probability == pytest.approx(0.5)
    a, b = math.log(0.05 / 0.95), math.log(0.95 / 0.05)
    sigma2 = (2.0 / (800 / math.log(10))) ** 2
    assert middle.expected_games == pytest.approx(-a * b / sigma2)
    nearby = sprt_forecast(0.0, 2.0, 1.0 + 1e-7)
    assert nearby.expected_games == pytest.approx(middle.expected_games, rel=1e-6)


def test_symmetric_around_the_midpoint() -> None:
    low, high = sprt_forecast(0.0, 2.0, -0.5), sprt_forecast(0.0, 2.0, 2.5)
    assert low.pass_probability == pytest.approx(1 - high.pass_probability)
    assert low.expected_games == pytest.approx(high.expected_games)


def test_extreme_strengths_neither_overflow_nor_lose_the_answer() -> None:
    strong, weak = sprt_forecast(0.0, 2.0, 500.0), sprt_forecast(0.0, 2.0, -500.0)
    assert strong.pass_probability == pytest.approx(1.0)
    assert weak.pass_probability == pytest.approx(0.0, abs=1e-300)
    assert 0 < strong.expected_games < 1000


@pytest.mark.parametrize("elo_model", ["normalized", "logistic"])
def test_the_table_is_monotone_in_pass_probability(elo_model: str) -> None:
    model = sprt_model(elo_model, 0.0, 2.0, draw_ratio=0.49, rms_bias=191.0)
    table = model_table(model, steps=11)
    probabilities = [row.pass_probability for row in table]
    assert probabilities == sorted(probabilities)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="elo1"):
        sprt_forecast(2.0, 0.0, 1.0)
    model = sprt_model("logistic", 0.0, 2.0, draw_ratio=0.5, rms_bias=0.0)
    with pytest.raises(ValueError, match="steps"):
        model_table(model, steps=1)


@pytest.mark.parametrize("elo_model", ["normalized", "logistic"])
@pytest.mark.parametrize(("draw_ratio", "rms_bias"), [(0.49, 191.0), (0.6, 0.0), (0.2, 50.0)])
def test_the_models_error_rates_hold_at_their_logistic_bounds(
    elo_model: str, draw_ratio: float, rms_bias: float
) -> None:
    model = sprt_model(elo_model, 0.0, 2.0, draw_ratio=draw_ratio, rms_bias=rms_bias)
    elo0, elo1 = model.logistic_bounds
    assert model_forecast(model, elo0).pass_probability == pytest.approx(0.05, rel=1e-9)
    assert model_forecast(model, elo1).pass_probability == pytest.approx(0.95, rel=1e-9)
    if elo_model == "logistic":
        assert (elo0, elo1) == pytest.approx((0.0, 2.0))


def test_a_normalized_test_lasts_as_long_whatever_the_draws_and_biases() -> None:
    """Normalized bounds scale with the game's spread: the length of a test at its
    midpoint is the same in any book, and that of the nElo forecast."""
    nelo_games = sprt_forecast(0.0, 2.0, 1.0).expected_games
    for draw_ratio, rms_bias in ((0.49, 191.0), (0.6, 0.0), (0.2, 50.0)):
        model = sprt_model("normalized", 0.0, 2.0, draw_ratio=draw_ratio, rms_bias=rms_bias)
        midpoint = elo_from_score((model.score0 + model.score1) / 2.0)
        assert model_forecast(model, midpoint).expected_games == pytest.approx(nelo_games)


def test_a_logistic_test_is_shorter_with_more_draws_and_more_bias() -> None:
    """Logistic bounds are fixed scores: less variance per game, fewer games."""
    games = [
        model_forecast(sprt_model("logistic", 0.0, 2.0, draw_ratio=d, rms_bias=b), 1.0)
        for d, b in ((0.2, 0.0), (0.6, 0.0), (0.6, 100.0))
    ]
    lengths = [forecast.expected_games for forecast in games]
    assert lengths == sorted(lengths, reverse=True)
    # With no bias and no draws a game's score varies by 1/4.
    plain = sprt_model("logistic", 0.0, 2.0, draw_ratio=1e-12, rms_bias=0.0)
    assert plain.variance == pytest.approx(0.25)


def test_the_model_table_spans_a_third_beyond_each_bound() -> None:
    model = sprt_model("logistic", 0.0, 3.0, draw_ratio=0.5, rms_bias=0.0)
    table = model_table(model, steps=6)
    assert [row.elo for row in table] == pytest.approx([-1.0, 0.0, 1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("bayes", 0.0, 2.0, 0.5, 0.0), "Elo model"),
        (("logistic", 0.0, 2.0, 1.0, 0.0), "draw ratio"),
        (("logistic", 0.0, 2.0, 0.5, -1.0), "RMS bias"),
        (("normalized", 0.0, 2.0, 0.9, 191.0), "not compatible"),
        (("normalized", 2.0, 2.0, 0.5, 0.0), "elo1"),
    ],
)
def test_a_model_of_bad_values_is_refused(
    arguments: tuple[str, float, float, float, float], message: str
) -> None:
    elo_model, elo0, elo1, draw_ratio, rms_bias = arguments
    with pytest.raises(ValueError, match=message):
        sprt_model(elo_model, elo0, elo1, draw_ratio=draw_ratio, rms_bias=rms_bias)
