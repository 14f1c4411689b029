"""Fixed-games Elo, nElo summary, BayesElo conversions: reference rows 15-19, 28-32."""

import pytest

from arbiter.stats import (
    NELO_DIVIDED_BY_NT,
    bayeselo_to_elo,
    draw_elo,
    elo_from_score,
    fixed_games_elo,
    nelo_summary,
    raw_stats,
    score_from_elo,
)
from arbiter.stats.elo import Z975
from tests.stats.support import close


@pytest.mark.parametrize(
    ("results", "elo", "elo95", "los", "ci"),
    [
        (
            [39, 2226, 31451, 2412, 40],
            0.902981048809024,
            0.6625314859816553,
            0.9962220973354207,
            (0.24044956282736862, 1.5655125347906793),
        ),
        (
            [1000, 2000, 3000, 2000, 1000],
            -0.0,
            4.144394656677981,
            0.5,
            (-4.144394656677981, 4.144394656677981),
        ),
        (
            [10789, 19328, 33806, 19402, 10543],
            -0.7735773359165423,
            1.2775798957280218,
            0.1176588580327751,
            (-2.051157231644564, 0.5040025598114795),
        ),
        (
            [80, 200, 100],
            18.302996224270025,
            24.077222631143705,
            0.9325545227452039,
            (-5.77422640687368, 42.38021885541373),
        ),
        (
            [1500, 4000, 1450],
            -2.499579710800617,
            5.322045251976975,
            0.17862162141635968,
            (-7.821624962777593, 2.8224655411763586),
        ),
    ],
)
def test_fixed_games_rows_15_to_19(results, elo, elo95, los, ci) -> None:  # type: ignore[no-untyped-def]
    est = fixed_games_elo(results)
    assert est.elo == close(elo)
    assert est.elo95 == close(elo95)
    assert est.los == close(los)
    assert est.ci[0] == close(ci[0])
    assert est.ci[1] == close(ci[1])


@pytest.mark.parametrize(
    ("penta", "nelo", "nelo95", "ratio"),
    [
        ([39, 2226, 31451, 2412, 40], 3.450799606946096, 2.5312396032638778, 1.082560706401766),
        (
            [10789, 19328, 33806, 19402, 10543],
            -0.9516290044726476,
            1.5716226767743608,
            0.9942889398014411,
        ),
        ([100, 2200, 5000, 2400, 120], 8.041870393617927, 4.860938034836621, 1.0956521739130434),
    ],
)
def test_nelo_rows_30_to_32(penta, nelo, nelo95, ratio) -> None:  # type: ignore[no-untyped-def]
    summary = nelo_summary(penta)
    assert summary.nelo == close(nelo)
    assert summary.nelo95 == close(nelo95)
    assert summary.pairs_ratio == close(ratio)


def test_drawelo_rows_28_29() -> None:
    drawelo = draw_elo([1500, 4000, 1450])
    assert drawelo == close(227.85998609604604)
    assert bayeselo_to_elo(6, 227.85998609604604) == close(4.012393449513851)


def test_logistic_round_trip_and_clamp() -> None:
    assert elo_from_score(score_from_elo(123.0)) == pytest.approx(123.0)
    assert elo_from_score(1.0) == elo_from_score(0.999)
    assert pytest.approx(347.4355855) == NELO_DIVIDED_BY_NT


def test_z975_matches_scipy() -> None:
    from scipy.stats import norm

    assert pytest.approx(norm.ppf(0.975), rel=1e-15) == Z975


def test_raw_stats() -> None:
    stats = raw_stats(716, 591, 2163, [100, 400, 900, 200, 135])
    assert stats.draw_ratio == pytest.approx(2163 / 3470)
    assert stats.drawelo == pytest.approx(draw_elo([591, 2163, 716]))
    assert stats.pentanomial is not None
    assert stats.variance_ratio == pytest.approx(
        2 * stats.pentanomial.variance / stats.trinomial.variance
    )
    assert stats.trinomial.mean == pytest.approx((716 + 2163 / 2) / 3470)
    assert raw_stats(1, 1, 0).pentanomial is None
    assert raw_stats(0, 0, 0).draw_ratio == 0.0


def test_nelo_needs_pentanomial() -> None:
    with pytest.raises(ValueError, match="pentanomial"):
        nelo_summary([1, 2, 3])
