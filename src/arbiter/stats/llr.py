"""Generalized log-likelihood ratios of trinomial and pentanomial results (reference §5.1).

The LLR of H1 against H0 is N·Σ p̂_i·ln(q1_i/q0_i), where q_j is the
maximum-likelihood distribution on the same support that satisfies the
hypothesis: a fixed mean score (logistic Elo) or a fixed t-value (normalized
Elo). The constrained MLE is q_i = p̂_i/(1 + x·a'_i) with x the unique root of
the secular equation Σ p̂_i·a'_i/(1 + x·a'_i) = 0 on (−1/max a', −1/min a');
it is found here by safeguarded Halley steps instead of scipy's brentq. On
five buckets the time is Python's per-statement overhead more than arithmetic,
so the code counts passes and statements (docs/benchmarks.md, Statistics).
"""

import functools
import math
import operator
from collections.abc import Sequence

from arbiter.stats._pdf import POWERS, check_shape, empirical, mean_var, results_to_pdf
from arbiter.stats.elo import (
    NELO_DIVIDED_BY_NT,
    bayeselo_probabilities,
    bayeselo_to_elo,
    draw_elo,
    score_from_elo,
)

T_VALUE_ROUNDS = 10
T_VALUE_TOLERANCE = 1e-9
_MAX_STEPS = 200
_INSIDE = 1.0 - 1e-15

Tilt = tuple[float, float]  # (c, x): a constrained MLE is p̂/(c + x·v)


@functools.lru_cache(maxsize=64)
def sprt_bounds(alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """Wald's SPRT bounds (A, B) = (ln(β/(1−α)), ln((1−β)/α))."""
    if not (0.0 < alpha < 1.0 and 0.0 < beta < 1.0):
        raise ValueError(f"alpha and beta must be in (0, 1), got {alpha!r}, {beta!r}")
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def secular_root(
    probs: Sequence[float], shifted: Sequence[float], guess: float = 0.0
) -> float | None:
    """Root x of f(x) = Σ p_i·a_i/(1 + x·a_i) = 0, or None when the a_i do not change sign.

    f decreases strictly between its poles −1/max a and −1/min a, from +∞ to
    −∞, and is smooth there, so Halley's method (cubic convergence) is safe
    while its steps stay inside the bracket; otherwise a Newton step is tried,
    then bisection. The search starts from `guess` when it lies inside the
    bracket, else from 0. A Halley step smaller than 1e-5 of the distance to the
    nearer pole leaves an error of about 1e-15 of that distance, so it ends the
    search without a confirming pass (the reference's brentq stops at 2e-12).
    The bracket stops 1e-15 (relative) short of the poles, where 1 + x·a is
    still positive after rounding, so no term needs a guard.
    """
    top, bottom = max(shifted), min(shifted)
    if top <= 0.0 or bottom >= 0.0:
        return None  # the constraint lies outside the support: no MLE exists
    pole_lo, pole_hi = -1.0 / top, -1.0 / bottom
    lo, hi = pole_lo * _INSIDE, pole_hi * _INSIDE
    x = guess if lo < guess < hi else 0.0
    terms = _secular_terms_5 if len(shifted) == 5 else _secular_terms
    for _ in range(_MAX_STEPS):
        f, d1, d2 = terms(probs, shifted, x)
        if f > 0.0:
            lo = x
        elif f < 0.0:
            hi = x
        else:
            return x
        newton = f / d1
        damping = 1.0 - newton * d2 / d1
        if damping > 0.5:  # Halley's step, unless the curvature makes it blow up
            nxt = x + newton / damping
            if lo < nxt < hi:
                margin = abs(nxt - x) * 1e5  # the step, against the distance to either pole
                if pole_lo + margin <= nxt <= pole_hi - margin:
                    return nxt
                x = nxt
                continue
        nxt = x + newton
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if nxt in (lo, hi) or abs(nxt - x) <= 1e-15 * abs(x):
            return nxt
        x = nxt
    return x


def _secular_terms(
    probs: Sequence[float], shifted: Sequence[float], x: float
) -> tuple[float, float, float]:
    """(f, −f′, f″/2) at x: Σ p·r, Σ p·r², Σ p·r³ with r = a/(1 + x·a)."""
    f = d1 = d2 = 0.0
    for p, a in zip(probs, shifted, strict=False):  # strict costs 20% here
        r = a / (1.0 + x * a)
        pr = p * r
        f += pr
        pr *= r
        d1 += pr
        d2 += pr * r
    return f, d1, d2


def _secular_terms_5(
    probs: Sequence[float], shifted: Sequence[float], x: float
) -> tuple[float, float, float]:
    """_secular_terms unrolled for pentanomial results, which every SPRT has.

    On five buckets the loop's own bytecode costs as much as its arithmetic:
    unrolled, the exact LLRs take 10-12% less time.
    """
    p0, p1, p2, p3, p4 = probs
    a0, a1, a2, a3, a4 = shifted
    r0, r1, r2 = a0 / (1.0 + x * a0), a1 / (1.0 + x * a1), a2 / (1.0 + x * a2)
    r3, r4 = a3 / (1.0 + x * a3), a4 / (1.0 + x * a4)
    w0, w1, w2, w3, w4 = p0 * r0, p1 * r1, p2 * r2, p3 * r3, p4 * r4
    f = w0 + w1 + w2 + w3 + w4
    w0, w1, w2, w3, w4 = w0 * r0, w1 * r1, w2 * r2, w3 * r3, w4 * r4
    return f, w0 + w1 + w2 + w3 + w4, w0 * r0 + w1 * r1 + w2 * r2 + w3 * r3 + w4 * r4


def _log_ratio_mean(probs: Sequence[float], num: Sequence[float], den: Sequence[float]) -> float:
    """Σ p_i·ln(num_i/den_i): the mean of ln(q1/q0) under p̂ (or of ln(d0/d1), q_j = p̂/d_j)."""
    total: float = sum(map(operator.mul, probs, map(math.log, map(operator.truediv, num, den))))
    return total


@functools.lru_cache(maxsize=256)
def _uniform_round(values: tuple[float, ...], ref: float, t: float) -> tuple[float, ...]:
    """The first round's shifted values: from the uniform start they depend on t alone."""
    q = 1.0 / len(values)
    mu = sum(q * a for a in values)
    sigma = math.sqrt(sum(q * (a - mu) ** 2 for a in values))
    return tuple(a - ref - t * sigma * (1.0 + ((mu - a) / sigma) ** 2) / 2.0 for a in values)


def mle_t_value(
    values: tuple[float, ...], probs: Sequence[float], ref: float, t: float
) -> list[float]:
    """MLE probabilities on `values` with (μ − ref)/σ = t (normalized model), given p̂.

    Fixed point from the uniform distribution: each round re-solves the secular
    equation with a_i − ref − t·σ·(1 + ((μ − a_i)/σ)²)/2, the linearization of
    the t-value constraint at the current (μ, σ); at most 10 rounds, stopping when
    no probability moves by 1e-9. The same path as the reference is kept on
    purpose: stopping elsewhere would shift the LLR at the 1e-9 level. The first
    round (from the uniform start) is cached per t, each later root starts from
    the previous one, and each round's tilt, largest move and new mean share one
    loop: on five buckets Python's per-statement cost, not arithmetic, is the time.
    """
    if len(values) == 5:
        return _mle_t_value_5(values, probs, ref, t)
    return _mle_t_value_n(values, probs, ref, t)


def _mle_t_value_n(
    values: tuple[float, ...], probs: Sequence[float], ref: float, t: float
) -> list[float]:
    """mle_t_value on any number of buckets."""
    q = [1.0 / len(values)] * len(values)
    shifted: Sequence[float] = _uniform_round(values, ref, t)
    x: float | None = 0.0
    for _ in range(T_VALUE_ROUNDS):
        x = secular_root(probs, shifted, x or 0.0)
        if x is None:
            break
        tilted: list[float] = []
        moved = mu = 0.0
        for p, a, v, before in zip(probs, shifted, values, q, strict=False):
            qi = p / (1.0 + x * a)
            tilted.append(qi)
            mu += qi * v
            step = qi - before if qi > before else before - qi
            if step > moved:  # noqa: PLR1730 (max() and abs() calls cost 10% of the LLR here)
                moved = step
        q = tilted
        if t == 0.0 or moved < T_VALUE_TOLERANCE:
            break  # (t = 0: the shifted values do not depend on (μ, σ), so rounds repeat)
        var = 0.0
        for v, qi in zip(values, q, strict=False):
            var += qi * (v - mu) ** 2
        sigma = math.sqrt(var)
        if sigma == 0.0:
            break
        # a − ref − t·σ·(1 + ((μ − a)/σ)²)/2, with one division per round instead of per bucket
        offset, curvature = ref + 0.5 * t * sigma, 0.5 * t / sigma
        shifted = [a - offset - curvature * (mu - a) ** 2 for a in values]
    return q


def _mle_t_value_5(
    values: tuple[float, ...], probs: Sequence[float], ref: float, t: float
) -> list[float]:
    """mle_t_value unrolled for pentanomial results (every SPRT has them): the same
    rounds and operations in the same order, so the same floats, in about half the
    time (on five buckets the loops' bytecode cost more than their arithmetic).
    A round stops when every probability moved by less than the tolerance, which
    is the general version's largest move below it."""
    v0, v1, v2, v3, v4 = values
    p0, p1, p2, p3, p4 = probs
    b0 = b1 = b2 = b3 = b4 = 1.0 / 5
    shifted: Sequence[float] = _uniform_round(values, ref, t)
    x: float | None = 0.0
    tol = T_VALUE_TOLERANCE
    for _ in range(T_VALUE_ROUNDS):
        x = secular_root(probs, shifted, x or 0.0)
        if x is None:
            break
        a0, a1, a2, a3, a4 = shifted
        q0, q1, q2 = p0 / (1.0 + x * a0), p1 / (1.0 + x * a1), p2 / (1.0 + x * a2)
        q3, q4 = p3 / (1.0 + x * a3), p4 / (1.0 + x * a4)
        settled = (
            -tol < q0 - b0 < tol
            and -tol < q1 - b1 < tol
            and -tol < q2 - b2 < tol
            and -tol < q3 - b3 < tol
            and -tol < q4 - b4 < tol
        )
        b0, b1, b2, b3, b4 = q0, q1, q2, q3, q4
        if t == 0.0 or settled:
            break
        mu = q0 * v0 + q1 * v1 + q2 * v2 + q3 * v3 + q4 * v4
        var = (
            q0 * (v0 - mu) ** 2
            + q1 * (v1 - mu) ** 2
            + q2 * (v2 - mu) ** 2
            + q3 * (v3 - mu) ** 2
            + q4 * (v4 - mu) ** 2
        )
        sigma = math.sqrt(var)
        if sigma == 0.0:
            break
        offset, curvature = ref + 0.5 * t * sigma, 0.5 * t / sigma
        shifted = (
            v0 - offset - curvature * (mu - v0) ** 2,
            v1 - offset - curvature * (mu - v1) ** 2,
            v2 - offset - curvature * (mu - v2) ** 2,
            v3 - offset - curvature * (mu - v3) ** 2,
            v4 - offset - curvature * (mu - v4) ** 2,
        )
    return [b0, b1, b2, b3, b4]


def llr_logistic(elo0: float, elo1: float, results: Sequence[float]) -> float:
    """Exact LLR for logistic Elo bounds: MLE with mean score L(elo_j) under each H_j.

    With q_j = p̂/(1 + x_j·(v − s_j)) the LLR is N·Σ p̂·ln[(1 + x_0·a_0)/(1 + x_1·a_1)].
    Both roots start from a Halley step computed from the power sums of p̂,
    shared by the two hypotheses, so one pass over the buckets usually ends each.
    """
    count, values, probs = empirical(results)
    five = len(values) == 5
    sums = _power_sums_5(probs) if five else _power_sums(probs, values)
    tilts: list[Tilt] = []  # (1 − x·s, x): 1 + x·(v − s) = (1 − x·s) + x·v
    for score in _logistic_scores(elo0, elo1):
        shifted = [v - score for v in values]
        x = secular_root(probs, shifted, _halley_from_zero(sums, score))
        tilts.append((1.0, 0.0) if x is None else (1.0 - x * score, x))
    if five:
        return count * _tilt_log_ratio_5(probs, *tilts)
    return count * _tilt_log_ratio(probs, values, *tilts)


def _tilt_log_ratio(
    probs: Sequence[float], values: Sequence[float], tilt0: Tilt, tilt1: Tilt
) -> float:
    """Σ p·ln[(c0 + x0·v)/(c1 + x1·v)]."""
    (c0, x0), (c1, x1) = tilt0, tilt1
    total = 0.0
    for p, v in zip(probs, values, strict=False):
        total += p * math.log((c0 + x0 * v) / (c1 + x1 * v))
    return total


def _tilt_log_ratio_5(probs: Sequence[float], tilt0: Tilt, tilt1: Tilt) -> float:
    """_tilt_log_ratio on the pentanomial support (0, ¼, ½, ¾, 1), unrolled: the
    same products in the same order (x·0 and x·1 are exact)."""
    (c0, x0), (c1, x1) = tilt0, tilt1
    p0, p1, p2, p3, p4 = probs
    return (
        p0 * math.log(c0 / c1)
        + p1 * math.log((c0 + x0 * 0.25) / (c1 + x1 * 0.25))
        + p2 * math.log((c0 + x0 * 0.5) / (c1 + x1 * 0.5))
        + p3 * math.log((c0 + x0 * 0.75) / (c1 + x1 * 0.75))
        + p4 * math.log((c0 + x0) / (c1 + x1))
    )


def _power_sums(probs: Sequence[float], values: Sequence[float]) -> list[float]:
    """Σ p·v, Σ p·v², Σ p·v³."""
    return [sum(map(operator.mul, probs, powers)) for powers in POWERS[len(values)]]


def _power_sums_5(probs: Sequence[float]) -> tuple[float, float, float]:
    """_power_sums on the pentanomial support (0, ¼, ½, ¾, 1), unrolled: the
    powers are exact binary fractions, so the products and their order are the
    same (the bucket at 0 adds nothing)."""
    _, p1, p2, p3, p4 = probs
    return (
        p1 * 0.25 + p2 * 0.5 + p3 * 0.75 + p4,
        p1 * 0.0625 + p2 * 0.25 + p3 * 0.5625 + p4,
        p1 * 0.015625 + p2 * 0.125 + p3 * 0.421875 + p4,
    )


@functools.lru_cache(maxsize=256)
def _logistic_scores(elo0: float, elo1: float) -> tuple[float, float]:
    return score_from_elo(elo0), score_from_elo(elo1)


def _halley_from_zero(sums: Sequence[float], s: float) -> float:
    """Start for the secular root with a_i = v_i − s: Halley's step from x = 0.

    At 0, f = m1, f′ = −m2 and f″ = 2·m3 with m_k = Σ p·(v − s)^k, expanded
    here from the power sums Σ p·v^k; the step lands within about (x·a)³ of the
    root (1e-5 relative at Elo-sized differences), close enough for the next
    Halley step to be the last. A poor start costs passes, never accuracy.
    """
    r1, r2, r3 = sums
    m1 = r1 - s
    m2 = r2 - s * (2.0 * r1 - s)
    m3 = r3 - s * (3.0 * r2 - s * (3.0 * r1 - s))
    newton = m1 / m2
    damping = 1.0 - newton * m3 / m2
    return newton / damping if damping > 0.5 else newton


def normalized_targets(nelo0: float, nelo1: float, n_buckets: int) -> tuple[float, float]:
    """t-values of normalized Elo bounds: nElo/(800/ln10), ×√2 for pair averages."""
    factor = math.sqrt(2.0) if n_buckets == 5 else 1.0
    return factor * nelo0 / NELO_DIVIDED_BY_NT, factor * nelo1 / NELO_DIVIDED_BY_NT


def llr_normalized(nelo0: float, nelo1: float, results: Sequence[float]) -> float:
    """Exact LLR for normalized Elo bounds: MLE with t-value t_j under each H_j."""
    count, values, probs = empirical(results)
    t0, t1 = normalized_targets(nelo0, nelo1, len(results))
    q0 = mle_t_value(values, probs, 0.5, t0)
    q1 = mle_t_value(values, probs, 0.5, t1)
    return count * _log_ratio_mean(probs, q1, q0)


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
