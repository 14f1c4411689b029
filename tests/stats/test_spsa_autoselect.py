"""SPSA Autoselect: the reference's gains and lengths (values computed with the
reference's own script for the same parameters and time controls)."""

import pytest

from arbiter.stats.spsa_autoselect import (
    Interval,
    autoselect,
    chi2_quantile_95,
    seconds_per_move,
    virtual_draw_ratio,
)


@pytest.mark.parametrize(
    ("intervals", "per_move", "draw_ratio", "games", "lines"),
    [
        (
            [Interval("A", 100, 0, 200), Interval("B", 50, 0, 100)],
            seconds_per_move(10, 0.1, None),
            0.7393150693698313,
            159078,
            ["A,100,0,200,33.33,0.00737", "B,50,0,100,16.67,0.00737"],
        ),
        (
            [Interval("K", 1, 0, 3)],
            seconds_per_move(60, 0.6, None),
            0.8079273946709289,
            75149,
            ["K,1,0,3,0.50,0.01560"],
        ),
    ],
)
def test_as_the_reference(
    intervals: list[Interval], per_move: float, draw_ratio: float, games: int, lines: list[str]
) -> None:
    assert virtual_draw_ratio(per_move) == pytest.approx(draw_ratio, rel=1e-12)
    chosen = autoselect(intervals, draw_ratio)
    assert round(chosen.num_games) == games
    assert [param.line() for param in chosen.params] == lines


def test_the_chi2_quantile() -> None:
    assert chi2_quantile_95(1) == pytest.approx(3.8414588206941236, rel=1e-10)
    assert chi2_quantile_95(10) == pytest.approx(18.307038053275143, rel=1e-10)
    assert chi2_quantile_95(99) == pytest.approx(123.22522145336157, rel=1e-10)


def test_a_moves_clock_spreads_its_time_over_its_moves() -> None:
    assert seconds_per_move(20, 0.0, 40) == pytest.approx(0.5)
    assert seconds_per_move(10, 0.1, None) == pytest.approx(10 / 68 + 0.1)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="no parameters"):
        autoselect([], 0.5)
    with pytest.raises(ValueError, match="maximum"):
        autoselect([Interval("A", 1, 2, 2)], 0.5)
    with pytest.raises(ValueError, match="draw ratio"):
        autoselect([Interval("A", 1, 0, 2)], 1.0)
    with pytest.raises(ValueError, match="time per move"):
        virtual_draw_ratio(0.0)
