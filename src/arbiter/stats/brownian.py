"""Brownian motion with drift between two absorbing barriers (reference §5.1, SPRT Elo).

The LLR path of an SPRT is modelled as X_t = μ·t + σ·W_t started at 0 and
stopped at A < 0 or B > 0. Outcomes are ordered from worst to best: an early
fail, a later fail, still running at a low LLR, still running at a high LLR, a
late pass, an early pass. `outcome_cdf(μ)` is the probability that a test with
drift μ ends worse than the observed point (T, y):

    F = P(hit A before min(T, τ_B)) + P(alive at T and X_T < y).

Exact series (method of images in Fourier form, with the Girsanov factor
e^{γx − μ²t/(2σ²)}, γ = μ/σ²), with L = B − A, k_n = nπ/L,
λ_n = k_n²σ²/2 + μ²/(2σ²):

    P_A(T)  = P_A(∞) − (σ²/L)·e^{γA}·Σ sin(k_n·(−A))·k_n·e^{−λ_n T}/λ_n
    P_alive = (2/L)·e^{γA}·Σ sin(k_n·(−A))·e^{−λ_n T}·
              [e^{γY}(γ sin k_nY − k_n cos k_nY) + k_n]/(γ² + k_n²),  Y = y − A

with P_A(∞) = (e^{−2γB} − 1)/(e^{−2γB} − e^{−2γA}). Since λ_n = σ²(k_n² + γ²)/2 the
two sums share their denominators and their k_n terms cancel, leaving

    F = P_A(∞) + (2/L)·e^{γ·y − γ²σ²T/2}·Σ sin(k_n·(−A))·e^{−k_n²σ²T/2}·
        (γ sin k_nY − k_n cos k_nY)/(γ² + k_n²),

one division per mode for each drift (the reference's form). When the series converges
slowly (σ²T/L² < 0.01) or the drift dominates (|γL| > 15), Siegmund's
single-reflection approximation is used instead, as the reference does.
"""

import math
from dataclasses import dataclass, field

from arbiter.stats._math import normal_cdf, normal_log_cdf

_SERIES_CUTOFF = 45.0  # stop when e^{−(λ_n − λ_1)T} < e^{−45} ≈ 3e-20
_ASYMPTOTIC_FROM = 5.0  # γ·barrier from which the reference uses the 2-term Mills series
_MAX_EXPONENT = 700.0


@dataclass(frozen=True, slots=True)
class _Term:
    """One Fourier mode, with everything that does not depend on the drift multiplied in."""

    sin_part: float  # sin(k·(−A))·e^{−k²σ²T/2}·sin(kY)
    cos_part: float  # sin(k·(−A))·e^{−k²σ²T/2}·k·cos(kY)
    k2: float


@dataclass(frozen=True, slots=True)
class TwoBarrier:
    """Barriers A < 0 < B, diffusion σ and observed point (T, y); drift varies per call.

    Everything that does not depend on μ (the Fourier modes) is computed once,
    because the SPRT Elo search evaluates the same barriers at many drifts.
    """

    a: float
    b: float
    sigma: float
    t: float
    y: float
    _terms: tuple[_Term, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (self.a < 0.0 < self.b and self.sigma > 0.0 and self.t > 0.0):
            raise ValueError("TwoBarrier needs a < 0 < b, sigma > 0 and T > 0")
        object.__setattr__(self, "_terms", self._modes())

    def _modes(self) -> tuple[_Term, ...]:
        width = self.b - self.a
        y_rel = min(max(self.y, self.a), self.b) - self.a
        scale = self.sigma**2 * self.t / 2.0
        terms: list[_Term] = []
        first = (math.pi / width) ** 2 * scale
        n = 1
        while True:
            k = n * math.pi / width
            exponent = k * k * scale
            if n > 1 and exponent - first > _SERIES_CUTOFF:
                return tuple(terms)
            weight = math.sin(-k * self.a) * math.exp(-exponent)
            terms.append(
                _Term(weight * math.sin(k * y_rel), weight * k * math.cos(k * y_rel), k * k)
            )
            n += 1

    def use_siegmund(self, mu: float) -> bool:
        """The reference's switch: slow series convergence or a dominant drift."""
        sigma2, width = self.sigma**2, self.b - self.a
        return sigma2 * self.t / width**2 < 1e-2 or abs(mu / sigma2 * width) > 15.0

    def outcome_cdf(self, mu: float) -> float:
        """P(outcome worse than (T, y)) for drift `mu`, clipped to [0, 1]."""
        value = self.siegmund(mu) if self.use_siegmund(mu) else self.exact(mu)
        return min(max(value, 0.0), 1.0)

    def exact(self, mu: float) -> float:
        """The exact series (only well-conditioned when use_siegmund(mu) is False)."""
        sigma2 = self.sigma**2
        gamma = mu / sigma2
        gamma2 = gamma * gamma
        y = min(max(self.y, self.a), self.b)
        total = 0.0
        for m in self._terms:
            total += (gamma * m.sin_part - m.cos_part) / (gamma2 + m.k2)
        exponent = gamma * y - gamma2 * sigma2 * self.t / 2.0
        front = 2.0 / (self.b - self.a) * math.exp(min(exponent, _MAX_EXPONENT))
        return _hit_lower_eventually(gamma, self.a, self.b) + front * total

    def siegmund(self, mu: float) -> float:
        """Single-reflection approximation Φ(z) + e^{2γA}Φ(z_A) − e^{2γB}Φ(z_B)."""
        sigma2, t, y = self.sigma**2, self.t, self.y
        gamma = mu / sigma2
        spread = math.sqrt(t * sigma2)
        z = (y - mu * t) / spread
        z_a = (-y + mu * t + 2.0 * self.a) / spread
        z_b = (y - mu * t - 2.0 * self.b) / spread
        return (
            normal_cdf(z)
            + _reflected(2.0 * gamma * self.a, z_a)
            - _reflected(2.0 * gamma * self.b, z_b)
        )


def _hit_lower_eventually(gamma: float, a: float, b: float) -> float:
    """P(reach A before B) from 0 for drift ratio γ, via the scale function e^{−2γx}."""
    if gamma == 0.0:
        return b / (b - a)
    num = math.expm1(-2.0 * gamma * b)
    return num / (num - math.expm1(-2.0 * gamma * a))


def _reflected(log_factor: float, z: float) -> float:
    """e^{log_factor}·Φ(z), the image term of one barrier.

    From log_factor ≥ 10 (γ·barrier ≥ 5) the reference switches to the two-term
    Mills expansion −φ(z)·e^{log_factor}·(1/z − 1/z³); it is kept so the SPRT Elo
    agrees with the reference, with the exponent capped instead of overflowing.
    """
    if log_factor >= 2.0 * _ASYMPTOTIC_FROM and z < 0.0:
        exponent = min(-z * z / 2.0 + log_factor, _MAX_EXPONENT)
        return -math.exp(exponent) / math.sqrt(2.0 * math.pi) * (1.0 / z - 1.0 / z**3)
    if log_factor <= 0.0:
        return math.exp(log_factor) * normal_cdf(z)
    return math.exp(min(log_factor + normal_log_cdf(z), _MAX_EXPONENT))


def outcome_cdf(a: float, b: float, mu: float, sigma: float, *, t: float, y: float) -> float:
    """One-shot form of TwoBarrier(a, b, sigma, t, y).outcome_cdf(mu)."""
    return TwoBarrier(a, b, sigma, t, y).outcome_cdf(mu)
