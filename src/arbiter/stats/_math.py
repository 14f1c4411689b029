"""Numerical primitives the statistics need, in pure Python on top of `math`.

The worker must install without numpy/scipy, and per-call scipy overhead is what
made the reference slow (reliability-performance.md B3), so every special
function used here is written out: Brent's root finder, the normal CDF, and the
chi-square survival function via the regularized incomplete gamma function
(closed forms at 1 and 2 degrees of freedom). The inverse normal CDF is the
standard library's.
"""

import math
from collections.abc import Callable
from statistics import NormalDist

EPS = 2.220446049250313e-16
SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_STANDARD_NORMAL = NormalDist()


def brent(
    f: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    xtol: float = 1e-13,
    rtol: float = 4 * EPS,
    maxiter: int = 200,
) -> float:
    """Root of `f` in [lo, hi] by Brent-Dekker (bisection, secant, inverse quadratic).

    `f(lo)` and `f(hi)` must have opposite signs (or one of them be 0).
    Raises ValueError otherwise: callers decide how to widen the bracket.
    """
    return brent_bracketed(f, (lo, f(lo)), (hi, f(hi)), xtol=xtol, rtol=rtol, maxiter=maxiter)


Point = tuple[float, float]
"""(x, f(x))"""


def brent_bracketed(
    f: Callable[[float], float],
    lo: Point,
    hi: Point,
    *,
    xtol: float = 1e-13,
    rtol: float = 4 * EPS,
    maxiter: int = 200,
) -> float:
    """brent() on a bracket whose end values the caller has already computed."""
    if lo[1] == 0.0:
        return lo[0]
    if hi[1] == 0.0:
        return hi[0]
    if (lo[1] > 0.0) == (hi[1] > 0.0):
        raise ValueError("brent: the bracket does not contain a sign change")
    return _brent_loop(f, lo, hi, xtol=xtol, rtol=rtol, maxiter=maxiter)


def _brent_loop(
    f: Callable[[float], float],
    prev: Point,
    cur: Point,
    *,
    xtol: float,
    rtol: float,
    maxiter: int,
) -> float:
    # cur: best estimate; blk: the other end of the bracket; prev: last iterate.
    blk = prev
    step_prev = step_cur = cur[0] - prev[0]
    for _ in range(maxiter):
        if prev[1] != 0.0 and (prev[1] < 0.0) != (cur[1] < 0.0):
            blk = prev
            step_prev = step_cur = cur[0] - prev[0]
        if abs(blk[1]) < abs(cur[1]):
            prev, cur, blk = cur, blk, cur
        tol = 0.5 * (xtol + rtol * abs(cur[0]))
        half = 0.5 * (blk[0] - cur[0])
        if cur[1] == 0.0 or abs(half) < tol:
            return cur[0]
        step_prev, step_cur = _brent_step(prev, cur, blk, (step_prev, step_cur), (half, tol))
        prev = cur
        x = cur[0] + (step_cur if abs(step_cur) > tol else math.copysign(tol, half))
        cur = (x, f(x))
    return cur[0]


def _brent_step(
    prev: Point, cur: Point, blk: Point, steps: Point, limits: Point
) -> tuple[float, float]:
    """Next (previous step, step): interpolation when it is safe, else bisection."""
    half, tol = limits
    (x_prev, f_prev), (x_cur, f_cur), (x_blk, f_blk) = prev, cur, blk
    step_prev, step_cur = steps
    if abs(step_prev) <= tol or abs(f_cur) >= abs(f_prev):
        return half, half
    if x_prev == x_blk:  # secant
        trial = -f_cur * (x_cur - x_prev) / (f_cur - f_prev)
    else:  # inverse quadratic interpolation
        d_prev = (f_prev - f_cur) / (x_prev - x_cur)
        d_blk = (f_blk - f_cur) / (x_blk - x_cur)
        trial = -f_cur * (f_blk * d_blk - f_prev * d_prev) / (d_blk * d_prev * (f_blk - f_prev))
    if 2.0 * abs(trial) < min(abs(step_prev), 3.0 * abs(half) - tol):
        return step_cur, trial
    return half, half


def normal_cdf(x: float) -> float:
    """Φ(x), accurate in the lower tail (erfc keeps relative precision)."""
    return 0.5 * math.erfc(-x / SQRT2)


def normal_sf(x: float) -> float:
    """1 − Φ(x), accurate in the upper tail."""
    return 0.5 * math.erfc(x / SQRT2)


def normal_log_cdf(x: float) -> float:
    """ln Φ(x), finite far into the lower tail where Φ underflows."""
    if x > -30.0:
        return math.log(normal_cdf(x))
    # Asymptotic Mills-ratio series: Φ(x) ≈ φ(x)/|x| · (1 − 1/x² + 3/x⁴ − 15/x⁶).
    x2 = x * x
    series = 1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2)
    return -0.5 * x2 - _LOG_SQRT_2PI - math.log(-x) + math.log(series)


def normal_ppf(p: float) -> float:
    """Inverse normal CDF Φ⁻¹(p) for 0 < p < 1 (relative error ~1e-15)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"normal_ppf: probability {p!r} is not in (0, 1)")
    # Wichura's AS241 (the standard library's, in C): full double precision in
    # either tail, a quarter of a microsecond a call.
    return _STANDARD_NORMAL.inv_cdf(p)


def normal_isf(q: float) -> float:
    """Φ⁻¹(1 − q) without forming 1 − q, so tiny upper-tail probabilities keep precision."""
    return -normal_ppf(q)


def _gamma_p_series(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x) by its power series (x < a + 1)."""
    term = total = 1.0 / a
    ap = a
    for _ in range(100_000):
        ap += 1.0
        term *= x / ap
        total += term
        if abs(term) < abs(total) * EPS:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_q_fraction(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) by Lentz's continued fraction (x ≥ a + 1)."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < EPS:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chi2_sf(x: float, dof: float) -> float:
    """Survival function of the chi-square distribution: Q(dof/2, x/2)."""
    if dof <= 0:
        raise ValueError(f"chi2_sf: degrees of freedom {dof!r} must be positive")
    if x <= 0.0:
        return 1.0
    # Closed forms for the χ² of a three-column table (2 dof) and of two columns
    # (1 dof): the purge's residuals take one per worker, thousands per run.
    if dof == 2:
        return math.exp(-0.5 * x)
    if dof == 1:
        return math.erfc(math.sqrt(0.5 * x))
    a, half_x = 0.5 * dof, 0.5 * x
    if half_x < a + 1.0:
        return max(0.0, 1.0 - _gamma_p_series(a, half_x))
    return _gamma_q_fraction(a, half_x)
