"""Median-unbiased Elo of an SPRT, with 95% interval and LOS (reference §5.1).

The LLR path is modelled as Brownian motion with drift
μ_LLR(s) = (s − (s0 + s1)/2)(s1 − s0)/v and variance (s1 − s0)²/v per sample
(v: empirical variance). For a candidate logistic Elo the probability of an
outcome worse than the observed one is computed (brownian.py); the estimate is
where it equals ½, the 95% interval where it equals 0.975 and 0.025, and the
LOS is its value at Elo 0. The reported Elo is logistic whatever the model.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from arbiter.stats._math import brent, brent_bracketed, normal_ppf
from arbiter.stats._pdf import mean_var, results_to_pdf
from arbiter.stats.brownian import TwoBarrier
from arbiter.stats.elo import NELO_DIVIDED_BY_NT, score_from_elo
from arbiter.stats.llr import bayeselo_bounds, llr_logistic, llr_normalized, sprt_bounds

ELO_SEARCH_LIMIT = 1000.0
_MAX_EXPANSIONS = 60


@dataclass(frozen=True, slots=True)
class SprtElo:
    """The reply of get_elo/calc_elo for SPRT runs: {a, b, elo, ci, LOS, LLR}."""

    a: float
    b: float
    elo: float
    ci: tuple[float, float]
    los: float
    llr: float
    clamped: bool

    def as_dict(self) -> dict[str, object]:
        """The reference's JSON keys."""
        return {
            "a": self.a,
            "b": self.b,
            "elo": self.elo,
            "ci": [self.ci[0], self.ci[1]],
            "LOS": self.los,
            "LLR": self.llr,
        }


@dataclass(frozen=True, slots=True)
class _Model:
    """Drift of the LLR per sample as a function of the true score."""

    s0: float
    s1: float
    var: float

    def drift(self, score: float) -> float:
        return (score - (self.s0 + self.s1) / 2.0) * (self.s1 - self.s0) / self.var

    def sigma(self) -> float:
        return abs(self.s1 - self.s0) / math.sqrt(self.var)


def _scores(
    elo_model: str, elo0: float, elo1: float, var: float, n_buckets: int
) -> tuple[float, float]:
    """Scores of the bounds: L(elo) (logistic) or nt·σ_game + ½ (normalized)."""
    if elo_model == "logistic":
        return score_from_elo(elo0), score_from_elo(elo1)
    sigma_game = math.sqrt(2.0 * var if n_buckets == 5 else var)
    return tuple(e / NELO_DIVIDED_BY_NT * sigma_game + 0.5 for e in (elo0, elo1))  # type: ignore[return-value]


def _observed_point(llr: float, samples: float, a: float, b: float) -> tuple[float, float]:
    """(T, y): an LLR beyond a bound is moved onto it at the equivalent stopping time."""
    slope = llr / samples
    if llr < a:
        return a / slope, a
    if llr > b:
        return b / slope, b
    return samples, llr


def _solve(prob: Callable[[float], float], target: float, elo0: float, elo1: float) -> float:
    """Elo where prob(elo) = target, searching ±30·(elo1 − elo0) then widening to ±1000."""
    centre, width = (elo0 + elo1) / 2.0, elo1 - elo0
    span = 30.0
    while True:
        lo = max(centre - span * width, -ELO_SEARCH_LIMIT)
        hi = min(centre + span * width, ELO_SEARCH_LIMIT)
        try:
            return brent(lambda e: prob(e) - target, lo, hi)
        except ValueError:
            if lo > -ELO_SEARCH_LIMIT or hi < ELO_SEARCH_LIMIT:
                span *= 2.0
                continue
            return hi if prob(lo) - target > 0.0 else lo


def _solve_near(
    prob: Callable[[float], float],
    target: float,
    guess: tuple[float, float] | None,
    bounds: tuple[float, float],
) -> float | None:
    """The root of prob(elo) = target found from a (guess, step), or None to search widely.

    prob decreases with Elo, so from the guess the search steps (doubling) towards
    the root until the sign changes and hands that short bracket to Brent: about
    half the evaluations of Brent on the whole search interval. Within `bounds`
    (the first interval _solve searches) the root is the one _solve would find;
    outside them, or if prob is not decreasing there, None leaves it to _solve.
    """
    if guess is None:
        return None
    lo_limit, hi_limit = bounds
    x, step = min(max(guess[0], lo_limit), hi_limit), guess[1]
    fx = prob(x) - target
    if fx == 0.0:
        return x
    direction = 1.0 if fx > 0.0 else -1.0
    for _ in range(_MAX_EXPANSIONS):
        nxt = min(max(x + direction * step, lo_limit), hi_limit)
        if nxt == x:
            return None
        fn = prob(nxt) - target
        if (fn > 0.0) != (fx > 0.0) or fn == 0.0:
            return brent_bracketed(lambda e: prob(e) - target, (x, fx), (nxt, fn))
        if abs(fn) > abs(fx):
            return None  # moving away from the target: not the decreasing shape assumed
        x, fx, step = nxt, fn, 2.0 * step
    return None


def _guesses(
    model: _Model, walk: TwoBarrier, quantiles: Sequence[float]
) -> list[tuple[float, float] | None]:
    """(Elo, step) to start each search from: the quantile of X_T ~ N(μT, σ²T), barriers ignored.

    prob(elo) ≈ Φ((y − μT)/(σ√T)), so prob = Φ(z) at μ = (y − z·σ√T)/T; the
    step is a quarter of the standard error σ√T/T, both mapped from drift to
    score to Elo. None where that score is not in (0, 1).
    """
    sigma = model.sigma()
    spread = sigma * math.sqrt(walk.t) / walk.t
    score_per_drift = model.var / (model.s1 - model.s0)
    centre = (model.s0 + model.s1) / 2.0
    found: list[tuple[float, float] | None] = []
    for z in quantiles:
        score = centre + (walk.y / walk.t - z * spread) * score_per_drift
        if not 0.0 < score < 1.0:
            found.append(None)
            continue
        elo_per_score = 400.0 / math.log(10.0) / (score * (1.0 - score))
        step = 0.25 * spread * abs(score_per_drift) * elo_per_score
        found.append((-400.0 * math.log10(1.0 / score - 1.0), step))
    return found


def sprt_elo(
    results: Sequence[float],
    elo0: float,
    elo1: float,
    elo_model: str = "normalized",
    *,
    alpha: float = 0.05,
    beta: float = 0.05,
    ldw: Sequence[float] | None = None,
) -> SprtElo:
    """SPRT Elo estimate of pentanomial or [L, D, W] `results` for bounds in `elo_model`.

    For BayesElo the bounds are first converted to logistic Elo with drawelo
    estimated from `ldw` (the run's [L, D, W]; defaults to `results`).
    """
    if not elo0 < elo1:
        raise ValueError(f"elo0 must be below elo1, got {elo0!r} and {elo1!r}")
    if elo_model == "BayesElo":
        elo0, elo1 = bayeselo_bounds(elo0, elo1, ldw if ldw is not None else results)
        elo_model = "logistic"
    elif elo_model not in ("logistic", "normalized"):
        raise ValueError(f"unknown elo_model {elo_model!r} (normalized, logistic or BayesElo)")
    samples, pdf = results_to_pdf(results)
    mu, var = mean_var(pdf)
    model = _Model(*_scores(elo_model, elo0, elo1, var, len(results)), var)
    a, b = sprt_bounds(alpha, beta)
    estimate = samples * model.drift(mu)
    t, y = _observed_point(estimate, samples, a, b)
    walk = TwoBarrier(a, b, model.sigma(), t, y)

    def prob(elo: float) -> float:
        return walk.outcome_cdf(model.drift(score_from_elo(elo)))

    centre, width = (elo0 + elo1) / 2.0, elo1 - elo0
    bounds = (
        max(centre - 30.0 * width, -ELO_SEARCH_LIMIT),
        min(centre + 30.0 * width, ELO_SEARCH_LIMIT),
    )
    targets = (0.5, 0.975, 0.025)
    guesses = _guesses(model, walk, [normal_ppf(p) for p in targets])
    median, lower, upper = (
        found if (found := _solve_near(prob, p, guess, bounds)) is not None
        else _solve(prob, p, elo0, elo1)
        for p, guess in zip(targets, guesses, strict=True)
    )  # fmt: skip
    ci = (lower, upper)
    exact = llr_logistic if elo_model == "logistic" else llr_normalized
    clamped = estimate > 1.03 * b or estimate < 1.03 * a
    return SprtElo(a, b, median, ci, prob(0.0), exact(elo0, elo1, results), clamped)
