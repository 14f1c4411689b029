"""SPRT pass probability and expected length (Brownian approximation)."""

import math

import pytest

from arbiter.stats.sprt_forecast import forecast_table, sprt_forecast


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


def test_the_table_is_monotone_in_pass_probability() -> None:
    table = forecast_table(0.0, 2.0, steps=11)
    assert [row.nelo for row in table][::5] == [-2.0, 1.0, 4.0]
    probabilities = [row.pass_probability for row in table]
    assert probabilities == sorted(probabilities)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="elo1"):
        sprt_forecast(2.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="steps"):
        forecast_table(0.0, 2.0, steps=1)
