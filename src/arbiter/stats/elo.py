"""Elo scales and fixed-games Elo estimates (reference §5.1).

Three scales meet here: logistic Elo (score ↔ Elo through the logistic curve),
normalized Elo (a t-value scaled by 800/ln 10) and the legacy BayesElo model
with a draw parameter. The fixed-games estimates are closed-form normal
approximations, so they cost a few microseconds.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from arbiter.stats._math import normal_cdf, normal_ppf
from arbiter.stats._pdf import check_shape, moments, regularize, results_to_pdf

NELO_DIVIDED_BY_NT = 800.0 / math.log(10.0)
"""nElo = (800/ln 10) · t: the t-value→nElo factor (347.4355855…)."""

Z975 = normal_ppf(0.975)
"""Φ⁻¹(0.975) = 1.959963984540054, half-width of a 95% two-sided interval."""

SCORE_MIN, SCORE_MAX = 0.001, 0.999


def score_from_elo(elo: float) -> float:
    """Expected score of logistic Elo difference: L(x) = 1/(1 + 10^(−x/400))."""
    return 1.0 / (1.0 + math.pow(10.0, -elo / 400.0))


def elo_from_score(score: float) -> float:
    """Logistic Elo of a score, −400·log10(1/s − 1), with s clamped to [0.001, 0.999]."""
    s = min(max(score, SCORE_MIN), SCORE_MAX)
    return -400.0 * math.log10(1.0 / s - 1.0)


def bayeselo_probabilities(belo: float, drawelo: float) -> tuple[float, float, float]:
    """(P_win, P_draw, P_loss) of the BayesElo model at Elo `belo` and draw Elo `drawelo`."""
    p_win = 1.0 / (1.0 + math.pow(10.0, (drawelo - belo) / 400.0))
    p_loss = 1.0 / (1.0 + math.pow(10.0, (drawelo + belo) / 400.0))
    return p_win, 1.0 - p_win - p_loss, p_loss


def bayeselo_to_elo(belo: float, drawelo: float) -> float:
    """Logistic Elo with the same expected score as BayesElo `belo` at `drawelo`."""
    p_win, p_draw, _ = bayeselo_probabilities(belo, drawelo)
    return elo_from_score(p_win + 0.5 * p_draw)


def draw_elo(ldw: Sequence[float]) -> float:
    """BayesElo draw parameter estimated from [L, D, W]: 200·log10((1−P_L)/P_L·(1−P_W)/P_W)."""
    check_shape(ldw)
    losses, draws, wins = regularize(ldw)
    total = losses + draws + wins
    p_loss, p_win = losses / total, wins / total
    return 200.0 * math.log10((1.0 - p_loss) / p_loss * (1.0 - p_win) / p_win)


@dataclass(frozen=True, slots=True)
class EloEstimate:
    """Fixed-games Elo: point estimate, 95% half-width, interval and likelihood of superiority."""

    elo: float
    elo95: float
    los: float
    ci: tuple[float, float]


def games_mean_var(results: Sequence[float]) -> tuple[float, float, float]:
    """(games G, per-game mean score μ, per-game variance σ²) from regularized counts.

    Bucket i scores i/2 points for its game(s); a pentanomial sample is a pair,
    so its deviation is taken from 2μ and the pair variance is halved (§5.1).
    """
    check_shape(results)
    counts = regularize(results)
    per_sample = (len(counts) - 1) / 2.0  # games per sample: 1 or 2
    games = sum(counts) * per_sample
    mu = sum(n * (i / 2.0) for i, n in enumerate(counts)) / games
    var = sum(n * (i / 2.0 - per_sample * mu) ** 2 for i, n in enumerate(counts)) / games
    return games, mu, var


def fixed_games_elo(results: Sequence[float]) -> EloEstimate:
    """Elo ± 95% and LOS of [L, D, W] or pentanomial results (normal approximation)."""
    games, mu, var = games_mean_var(results)
    stderr = math.sqrt(var / games)
    elo = elo_from_score(mu)
    elo95 = (elo_from_score(mu + Z975 * stderr) - elo_from_score(mu - Z975 * stderr)) / 2.0
    los = normal_cdf((mu - 0.5) / stderr)
    return EloEstimate(elo, elo95, los, (elo - elo95, elo + elo95))


@dataclass(frozen=True, slots=True)
class NEloSummary:
    """The nElo line of a fixed-games run: nElo, its 95% half-width, pairs ratio."""

    nelo: float
    nelo95: float
    pairs_ratio: float


def nelo_summary(pentanomial: Sequence[float]) -> NEloSummary:
    """nElo = (800/ln10)/√2 · t with t = (μ − ½)/σ(pair average), §5.1.

    The 95% half-width (Φ⁻¹(0.975), not the rounded 1.96) uses the delta-method variance of t,
    Var_t = 1 − t·skew + ¼·t²·(exkurt + 2). The pairs ratio uses regularized
    counts, so a run without any lost pair still gives a finite number.
    """
    if len(pentanomial) != 5:
        raise ValueError(f"nElo needs a pentanomial (5 counts), got {pentanomial!r}")
    pairs, pdf = results_to_pdf(pentanomial)
    mu, var, skew, exkurt = moments(pdf)
    t = (mu - 0.5) / math.sqrt(var)
    var_t = max(1.0 - t * skew + 0.25 * t * t * (exkurt + 2.0), 0.0)
    scale = NELO_DIVIDED_BY_NT / math.sqrt(2.0)
    counts = regularize(pentanomial)
    ratio = (counts[3] + counts[4]) / (counts[0] + counts[1])
    return NEloSummary(scale * t, scale * Z975 * math.sqrt(var_t / pairs), ratio)


@dataclass(frozen=True, slots=True)
class DistributionStats:
    """Moments of one empirical distribution (values 0..1 per game or per pair average)."""

    samples: float
    mean: float
    variance: float
    skewness: float
    excess_kurtosis: float


def distribution_stats(results: Sequence[float]) -> DistributionStats:
    """Moments of the regularized empirical distribution of `results`."""
    samples, pdf = results_to_pdf(results)
    return DistributionStats(samples, *moments(pdf))


@dataclass(frozen=True, slots=True)
class RawStats:
    """The raw-statistics panel: both distributions, draw ratio, drawelo, variance ratio."""

    trinomial: DistributionStats
    pentanomial: DistributionStats | None
    draw_ratio: float
    drawelo: float
    variance_ratio: float | None
    """Per-game variance from pairs (2·Var(pair average)) over the trinomial one;
    below 1 when pairing reduces noise."""


def raw_stats(
    wins: int, losses: int, draws: int, pentanomial: Sequence[int] | None = None
) -> RawStats:
    """All raw statistics of a run's results."""
    tri = distribution_stats([losses, draws, wins])
    penta = distribution_stats(pentanomial) if pentanomial is not None else None
    ratio = 2.0 * penta.variance / tri.variance if penta is not None else None
    games = wins + losses + draws
    draw_ratio = draws / games if games > 0 else 0.0
    return RawStats(tri, penta, draw_ratio, draw_elo([losses, draws, wins]), ratio)
