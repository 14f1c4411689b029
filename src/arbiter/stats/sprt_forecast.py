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
The same holds in scores: with bounds s0 < s1 and a per-game variance v of a
game's score, the drift is (s1 − s0)(s − (s0 + s1)/2)/v and the variance
(s1 − s0)²/v per game. `sprt_model` builds (s0, s1, v) as the reference's
calculator does, from bounds in logistic or normalized Elo, the draw ratio
and the RMS bias (the spread of the openings' biases, in logistic Elo, which
pairing a game with its reverse takes out of the variance), and
`model_forecast` answers for a true logistic Elo. Pure.
"""

import math
from dataclasses import dataclass

from arbiter.stats.elo import NELO_DIVIDED_BY_NT, elo_from_score, score_from_elo
from arbiter.stats.llr import sprt_bounds

# Below this |θ|·(B − A) the expected length is −A·B/σ² (relative error ~1e-8);
# the general formula would lose digits to cancellation there.
_FLAT = 1e-4
_LARGE = 50.0  # from here on the pass probability is computed from ratios (no overflow)


@dataclass(frozen=True, slots=True)
class SprtForecast:
    elo: float  # the true Elo it answers for (normalized or logistic, as asked)
    pass_probability: float
    expected_games: float


ELO_MODELS = ("normalized", "logistic")


@dataclass(frozen=True, slots=True)
class SprtModel:
    """An SPRT's bounds as expected scores, and the per-game variance of a score."""

    score0: float
    score1: float
    variance: float

    @property
    def logistic_bounds(self) -> tuple[float, float]:
        return elo_from_score(self.score0), elo_from_score(self.score1)

    @property
    def normalized_bounds(self) -> tuple[float, float]:
        sigma = math.sqrt(self.variance)
        return (
            NELO_DIVIDED_BY_NT * (self.score0 - 0.5) / sigma,
            NELO_DIVIDED_BY_NT * (self.score1 - 0.5) / sigma,
        )


def sprt_model(
    elo_model: str, elo0: float, elo1: float, *, draw_ratio: float, rms_bias: float
) -> SprtModel:
    """The calculator's model of an SPRT(elo0, elo1) in `elo_model` (ELO_MODELS):
    a game's score varies by (1 − draw ratio)/4, less the square of the score
    that `rms_bias` (logistic Elo) stands for. ValueError when nothing is left."""
    if elo_model not in ELO_MODELS:
        raise ValueError(f"the Elo model must be one of {', '.join(ELO_MODELS)}")
    if not 0.0 < draw_ratio < 1.0:
        raise ValueError("the draw ratio must be strictly between 0 and 1")
    if rms_bias < 0.0:
        raise ValueError("the RMS bias must not be negative")
    bias_score = score_from_elo(rms_bias) - 0.5
    variance = (1.0 - draw_ratio) / 4.0 - bias_score**2
    if variance <= 0.0:
        raise ValueError("the draw ratio and the RMS bias are not compatible")
    if not elo1 > elo0:
        raise ValueError(f"elo1 ({elo1:g}) must be greater than elo0 ({elo0:g})")
    if elo_model == "logistic":
        return SprtModel(score_from_elo(elo0), score_from_elo(elo1), variance)
    sigma = math.sqrt(variance)
    score0, score1 = (0.5 + elo / NELO_DIVIDED_BY_NT * sigma for elo in (elo0, elo1))
    return SprtModel(score0, score1, variance)


def model_forecast(
    model: SprtModel, elo: float, *, alpha: float = 0.05, beta: float = 0.05
) -> SprtForecast:
    """Pass probability and expected games when the true logistic Elo is `elo`."""
    gap = model.score1 - model.score0
    mu = gap * (score_from_elo(elo) - (model.score0 + model.score1) / 2.0) / model.variance
    return _forecast(elo, mu, gap * gap / model.variance, alpha, beta)


def model_table(
    model: SprtModel, *, alpha: float = 0.05, beta: float = 0.05, steps: int = 21
) -> list[SprtForecast]:
    """Forecasts over the logistic bounds and a third of their width beyond each,
    as the reference's calculator charts them."""
    if steps < 2:
        raise ValueError("need at least 2 steps")
    elo0, elo1 = model.logistic_bounds
    start, stop = elo0 - (elo1 - elo0) / 3.0, elo1 + (elo1 - elo0) / 3.0
    return [
        model_forecast(model, start + (stop - start) * i / (steps - 1), alpha=alpha, beta=beta)
        for i in range(steps)
    ]


def sprt_forecast(
    elo0: float, elo1: float, nelo: float, *, alpha: float = 0.05, beta: float = 0.05
) -> SprtForecast:
    """Pass probability and expected games of SPRT(elo0, elo1) when the truth is `nelo`."""
    if not elo1 > elo0:
        raise ValueError(f"elo1 ({elo1:g}) must be greater than elo0 ({elo0:g})")
    t0, t1, t = (value / NELO_DIVIDED_BY_NT for value in (elo0, elo1, nelo))
    return _forecast(nelo, (t1 - t0) * (t - (t0 + t1) / 2.0), (t1 - t0) ** 2, alpha, beta)


def _forecast(elo: float, mu: float, sigma2: float, alpha: float, beta: float) -> SprtForecast:
    """The LLR a Brownian motion of drift `mu` and variance `sigma2` per game."""
    lower, upper = sprt_bounds(alpha, beta)
    theta = 2.0 * mu / sigma2
    p_pass = _pass_probability(theta, lower, upper)
    if abs(theta) * (upper - lower) < _FLAT:
        return SprtForecast(elo, p_pass, -lower * upper / sigma2)
    games = (p_pass * upper + (1.0 - p_pass) * lower) / mu
    return SprtForecast(elo, p_pass, games)


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
