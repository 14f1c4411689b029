"""What an SPRT with normalized Elo bounds will do: pass probability and expected length.

The LLR of a normalized SPRT after G games is close to
G·(t1 − t0)·(t̂ − (t0 + t1)/2), with t̂ the observed per-game t-value
(`llr_normalized_approx` to first order) and t̂ ~ t + N(0, 1/G). So the LLR
path is a Brownian motion with drift μ = (t1 − t0)·(t − (t0 + t1)/2) and
variance σ² = (t1 − t0)² per game, stopped at Wald's bounds A < 0 < B.
For such a path, with θ = 2μ/σ² (e^{−θX} is a martingale):

    P(pass) = (1 − e^{−θA}) / (e^{−θB} − e^{−θA})
    E[games] = (P·B + (1 − P)·A) / μ           (−A·B/σ² when μ = 0)

At t = t0 this gives exactly α, at t = t1 exactly 1 − β. Overshoot and the
discreteness of batches are ignored, so real runs end slightly later.
Pure; normalized Elo only (nElo = t · 800/ln 10).
"""

import math
from dataclasses import dataclass

from arbiter.stats.elo import NELO_DIVIDED_BY_NT
from arbiter.stats.llr import sprt_bounds

# Below this |θ|·(B − A) the expected length is −A·B/σ² (relative error ~1e-8);
# the general formula would lose digits to cancellation there.
_FLAT = 1e-4
_LARGE = 50.0  # from here on the pass probability is computed from ratios (no overflow)


@dataclass(frozen=True, slots=True)
class SprtForecast:
    nelo: float
    pass_probability: float
    expected_games: float


def sprt_forecast(
    elo0: float, elo1: float, nelo: float, *, alpha: float = 0.05, beta: float = 0.05
) -> SprtForecast:
    """Pass probability and expected games of SPRT(elo0, elo1) when the truth is `nelo`."""
    if not elo1 > elo0:
        raise ValueError(f"elo1 ({elo1:g}) must be greater than elo0 ({elo0:g})")
    lower, upper = sprt_bounds(alpha, beta)
    t0, t1, t = (value / NELO_DIVIDED_BY_NT for value in (elo0, elo1, nelo))
    sigma2 = (t1 - t0) ** 2
    mu = (t1 - t0) * (t - (t0 + t1) / 2.0)
    theta = 2.0 * mu / sigma2
    p_pass = _pass_probability(theta, lower, upper)
    if abs(theta) * (upper - lower) < _FLAT:
        return SprtForecast(nelo, p_pass, -lower * upper / sigma2)
    games = (p_pass * upper + (1.0 - p_pass) * lower) / mu
    return SprtForecast(nelo, p_pass, games)


def _pass_probability(theta: float, lower: float, upper: float) -> float:
    if theta == 0.0:
        return -lower / (upper - lower)
    if abs(theta) * (upper - lower) < _LARGE:
        # expm1 keeps the small-drift case exact: the two terms have one sign.
        below = math.expm1(-theta * lower)
        return -below / (math.expm1(-theta * upper) - below)
    # Exponents relative to the largest one, so extreme drifts neither
    # overflow nor lose the answer (which tends to 0 or 1).
    if theta > 0:  # e^{−θA} is the largest term
        ratio_b = math.exp(-theta * (upper - lower))  # e^{−θB}/e^{−θA}
        ratio_1 = math.exp(theta * lower)  # 1/e^{−θA}
        return (ratio_1 - 1.0) / (ratio_b - 1.0)
    ratio_a = math.exp(theta * (upper - lower))  # e^{−θA}/e^{−θB}
    ratio_1 = math.exp(theta * upper)  # 1/e^{−θB}
    return (ratio_1 - ratio_a) / (1.0 - ratio_a)


def forecast_table(
    elo0: float,
    elo1: float,
    *,
    alpha: float = 0.05,
    beta: float = 0.05,
    low: float | None = None,
    high: float | None = None,
    steps: int = 21,
) -> list[SprtForecast]:
    """Forecasts for `steps` true nElo values evenly spread over [low, high]
    (by default one bound-width beyond each bound)."""
    width = elo1 - elo0
    start = elo0 - width if low is None else low
    stop = elo1 + width if high is None else high
    if steps < 2 or not stop > start:
        raise ValueError("need at least 2 steps over a non-empty range")
    return [
        sprt_forecast(elo0, elo1, start + (stop - start) * i / (steps - 1), alpha=alpha, beta=beta)
        for i in range(steps)
    ]
