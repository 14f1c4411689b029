"""Empirical distributions of trinomial and pentanomial results (reference §5).

A result list of length 3 is [L, D, W] game counts with outcome values
(0, ½, 1); a list of length 5 is [LL, LD, DD+WL, WD, WW] pair counts with
pair-average values (0, ¼, ½, ¾, 1). Zero counts become 1e-3 first
("regularize"), so logarithms and variances are always defined.
"""

from collections.abc import Sequence

REGULARIZE_EPSILON = 1e-3

Pdf = list[tuple[float, float]]
"""[(value a_i, probability p_i)] in bucket order."""


def regularize(results: Sequence[float]) -> list[float]:
    """Replace zero counts by 1e-3 (reference §5) so every bucket has mass."""
    return [float(n) if n != 0 else REGULARIZE_EPSILON for n in results]


def check_shape(results: Sequence[float]) -> None:
    """Only trinomial and pentanomial lists exist; anything else is a caller bug."""
    if len(results) not in (3, 5):
        raise ValueError(
            f"results must have 3 (L, D, W) or 5 (pentanomial) entries, got {results!r}"
        )
    if min(results) < 0:
        raise ValueError(f"results must be non-negative, got {list(results)!r}")


SUPPORT = {3: (0.0, 0.5, 1.0), 5: (0.0, 0.25, 0.5, 0.75, 1.0)}
"""Outcome values of the buckets: game scores, or pair-average scores."""

POWERS = {n: tuple(tuple(v**k for v in values) for k in (1, 2, 3)) for n, values in SUPPORT.items()}
"""(v, v², v³) over each support, for power sums Σ p_i·v_i^k."""


def empirical(results: Sequence[float]) -> tuple[float, tuple[float, ...], list[float]]:
    """(N, values a_i, probabilities p̂_i) after regularization, as parallel sequences.

    The LLR code works on these directly: building (a_i, p_i) tuples costs as
    much as the arithmetic done on five buckets.
    """
    check_shape(results)
    counts = regularize(results) if 0 in results else results
    total = float(sum(counts))
    return total, SUPPORT[len(counts)], [n / total for n in counts]


def results_to_pdf(results: Sequence[float]) -> tuple[float, Pdf]:
    """(N, p̂): sample count after regularization and the empirical distribution."""
    total, values, probs = empirical(results)
    return total, list(zip(values, probs, strict=True))


def mean_var(pdf: Pdf) -> tuple[float, float]:
    """Mean and variance of a discrete distribution."""
    mu = sum(p * a for a, p in pdf)
    var = sum(p * (a - mu) ** 2 for a, p in pdf)
    return mu, var


def moments(pdf: Pdf) -> tuple[float, float, float, float]:
    """Mean, variance, skewness and excess kurtosis (the nElo summary needs all four)."""
    mu, var = mean_var(pdf)
    m3 = sum(p * (a - mu) ** 3 for a, p in pdf)
    m4 = sum(p * (a - mu) ** 4 for a, p in pdf)
    return mu, var, m3 / var**1.5, m4 / var**2 - 3.0
