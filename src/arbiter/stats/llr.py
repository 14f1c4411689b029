"""Generalized log-likelihood ratios of trinomial and pentanomial results (reference §5.1).

The LLR of H1 against H0 is N·Σ p̂_i·ln(q1_i/q0_i), where q_j is the
maximum-likelihood distribution on the same support that satisfies the
hypothesis: a fixed mean score (logistic Elo) or a fixed t-value (normalized
Elo). The constrained MLE is q_i = p̂_i/(1 + x·a'_i) with x the unique root of
the secular equation Σ p̂_i·a'_i/(1 + x·a'_i) = 0 on (−1/max a', −1/min a');
it is found here by a safeguarded Newton iteration instead of scipy's brentq.
"""

import math
from collections.abc import Sequence

from arbiter.stats._pdf import Pdf, check_shape, mean_var, results_to_pdf
from arbiter.stats.elo import (
    NELO_DIVIDED_BY_NT,
    bayeselo_probabilities,
    bayeselo_to_elo,
    draw_elo,
    score_from_elo,
)

T_VALUE_ROUNDS = 10
T_VALUE_TOLERANCE = 1e-9
_TINY = 1e-300


def sprt_bounds(alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """Wald's SPRT bounds (A, B) = (ln(β/(1−α)), ln((1−β)/α))."""
    if not (0.0 < alpha < 1.0 and 0.0 < beta < 1.0):
        raise ValueError(f"alpha and beta must be in (0, 1), got {alpha!r}, {beta!r}")
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def secular_root(probs: Sequence[float], shifted: Sequence[float]) -> float | None:
    """Root x of Σ p_i·a_i/(1 + x·a_i) = 0, or None when the a_i do not change sign.

    The function is strictly decreasing between its poles, from +∞ to −∞, so
    Newton steps that stay inside the bracket are safe; others are replaced by
    bisection. Convergence is to the last bits, not to brentq's 2e-12.
    """
    top, bottom = max(shifted), min(shifted)
    if top <= 0.0 or bottom >= 0.0:
        return None  # the constraint lies outside the support: no MLE exists
    lo, hi = -1.0 / top, -1.0 / bottom
    x = 0.0
    for _ in range(200):
        f = df = 0.0
        for p, a in zip(probs, shifted, strict=True):
            d = 1.0 + x * a
            r = a / (d if d > _TINY else _TINY)  # rounding can land x on a pole
            f += p * r
            df -= p * r * r
        if f > 0.0:
            lo = x
        elif f < 0.0:
            hi = x
        else:
            return x
        nxt = x - f / df
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if abs(nxt - x) <= 1e-15 * abs(x) or nxt in (lo, hi):
            return nxt
        x = nxt
    return x


def _tilt(pdf: Pdf, shifted: Sequence[float], x: float) -> list[float]:
    return [p / max(1.0 + x * a, _TINY) for (_, p), a in zip(pdf, shifted, strict=True)]


def mle_expected(pdf: Pdf, score: float) -> list[float]:
    """MLE probabilities on the support of `pdf` with mean `score` (logistic model)."""
    probs = [p for _, p in pdf]
    shifted = [a - score for a, _ in pdf]
    x = secular_root(probs, shifted)
    return probs if x is None else _tilt(pdf, shifted, x)


def mle_t_value(pdf: Pdf, ref: float, t: float) -> list[float]:
    """MLE probabilities with (μ − ref)/σ = t (normalized model).

    Fixed point from the uniform distribution: each round re-solves the secular
    equation with a_i − ref − t·σ·(1 + ((μ − a_i)/σ)²)/2, the linearization of
    the t-value constraint at the current (μ, σ); at most 10 rounds, stopping when
    no probability moves by 1e-9. The same path as the reference is kept on
    purpose: stopping elsewhere would shift the LLR at the 1e-9 level.
    """
    probs = [p for _, p in pdf]
    q = [1.0 / len(pdf)] * len(pdf)
    for _ in range(T_VALUE_ROUNDS):
        mu, var = mean_var([(a, qi) for (a, _), qi in zip(pdf, q, strict=True)])
        sigma = math.sqrt(var)
        if sigma == 0.0:
            break
        shifted = [a - ref - t * sigma * (1.0 + ((mu - a) / sigma) ** 2) / 2.0 for a, _ in pdf]
        x = secular_root(probs, shifted)
        if x is None:
            break
        previous, q = q, _tilt(pdf, shifted, x)
        if max(abs(u - v) for u, v in zip(previous, q, strict=True)) < T_VALUE_TOLERANCE:
            break
    return q


def _llr(count: float, pdf: Pdf, q0: Sequence[float], q1: Sequence[float]) -> float:
    return count * sum(p * math.log(b / a) for (_, p), a, b in zip(pdf, q0, q1, strict=True))


def llr_logistic(elo0: float, elo1: float, results: Sequence[float]) -> float:
    """Exact LLR for logistic Elo bounds: MLE with mean score L(elo_j) under each H_j."""
    count, pdf = results_to_pdf(results)
    q0, q1 = (mle_expected(pdf, score_from_elo(elo)) for elo in (elo0, elo1))
    return _llr(count, pdf, q0, q1)


def normalized_targets(nelo0: float, nelo1: float, n_buckets: int) -> tuple[float, float]:
    """t-values of normalized Elo bounds: nElo/(800/ln10), ×√2 for pair averages."""
    factor = math.sqrt(2.0) if n_buckets == 5 else 1.0
    return factor * nelo0 / NELO_DIVIDED_BY_NT, factor * nelo1 / NELO_DIVIDED_BY_NT


def llr_normalized(nelo0: float, nelo1: float, results: Sequence[float]) -> float:
    """Exact LLR for normalized Elo bounds: MLE with t-value t_j under each H_j."""
    count, pdf = results_to_pdf(results)
    t0, t1 = normalized_targets(nelo0, nelo1, len(results))
    q0, q1 = (mle_t_value(pdf, 0.5, t) for t in (t0, t1))
    return _llr(count, pdf, q0, q1)


def llr_normalized_approx(nelo0: float, nelo1: float, results: Sequence[float]) -> float:
    """Closed-form approximation (G/2)·ln[(1 + (t̂ − t0)²)/(1 + (t̂ − t1)²)] per game."""
    count, pdf = results_to_pdf(results)
    mu, var = mean_var(pdf)
    games_per_sample = 2.0 if len(results) == 5 else 1.0
    sigma_game = math.sqrt(games_per_sample * var)
    t = (mu - 0.5) / sigma_game
    t0, t1 = nelo0 / NELO_DIVIDED_BY_NT, nelo1 / NELO_DIVIDED_BY_NT
    games = games_per_sample * count
    return games / 2.0 * math.log((1.0 + (t - t0) ** 2) / (1.0 + (t - t1) ** 2))


def llr_logistic_approx(elo0: float, elo1: float, results: Sequence[float]) -> float:
    """Closed-form approximation N·(s1 − s0)(2μ − s0 − s1)/(2σ²) of the logistic LLR."""
    count, pdf = results_to_pdf(results)
    mu, var = mean_var(pdf)
    s0, s1 = score_from_elo(elo0), score_from_elo(elo1)
    return count * (s1 - s0) * (2.0 * mu - s0 - s1) / (2.0 * var)


def bayeselo_bounds(belo0: float, belo1: float, ldw: Sequence[float]) -> tuple[float, float]:
    """BayesElo bounds converted to logistic Elo with drawelo estimated from [L, D, W]."""
    drawelo = draw_elo(ldw)
    return bayeselo_to_elo(belo0, drawelo), bayeselo_to_elo(belo1, drawelo)


def llr_bayeselo(belo0: float, belo1: float, ldw: Sequence[float]) -> float:
    """Legacy LLR: Σ n_i·ln(P1_i/P0_i) with BayesElo (win, draw, loss) probabilities.

    drawelo is estimated from the same [L, D, W] data; the likelihoods are the
    model's own, not a maximum-likelihood fit (reference row 11 pins this down).
    """
    check_shape(ldw)
    if len(ldw) != 3:
        raise ValueError("the BayesElo model needs trinomial [L, D, W] results")
    drawelo = draw_elo(ldw)
    p0 = bayeselo_probabilities(belo0, drawelo)
    p1 = bayeselo_probabilities(belo1, drawelo)
    losses, draws, wins = ldw
    return (
        wins * math.log(p1[0] / p0[0])
        + draws * math.log(p1[1] / p0[1])
        + losses * math.log(p1[2] / p0[2])
    )


def llr(elo_model: str, elo0: float, elo1: float, results: Sequence[float]) -> float:
    """Exact LLR under `elo_model` ∈ {normalized, logistic, BayesElo}."""
    if elo_model == "normalized":
        return llr_normalized(elo0, elo1, results)
    if elo_model == "logistic":
        return llr_logistic(elo0, elo1, results)
    if elo_model == "BayesElo":
        return llr_bayeselo(elo0, elo1, results)
    raise ValueError(f"unknown elo_model {elo_model!r} (normalized, logistic or BayesElo)")
