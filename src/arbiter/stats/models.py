"""An SPRT's bounds in each Elo model, and the RMS bias of a run's openings
(the raw-statistics page, reference §5.1).

A bound given in one model is the same hypothesis in the others once the
run's own results say how a game varies: its expected score, its logistic
Elo, its normalized Elo (the score's distance from ½ in standard deviations
per game, times 800/ln 10) and its BayesElo at the run's draw ratio. The
per-game standard deviation comes from the pairs when there are any (twice
the variance of a pair's average), else from the single games.

The RMS bias is what pairing takes out: the trinomial variance per game
less the pentanomial one is the variance of the openings' biases; its root,
as a score above ½, in logistic Elo. Pure.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from arbiter.stats._pdf import moments, regularize, results_to_pdf
from arbiter.stats.elo import (
    NELO_DIVIDED_BY_NT,
    bayeselo_to_elo,
    draw_elo,
    elo_from_score,
    score_from_elo,
)


@dataclass(frozen=True, slots=True)
class BoundInModels:
    logistic: float
    normalized: float
    bayeselo: float  # NaN when no BayesElo has this score at the run's draw ratio
    score: float


@dataclass(frozen=True, slots=True)
class Spread:
    """How a game's score varies in a run."""

    draw_ratio: float  # of the regularized trinomial
    drawelo: float
    trinomial_variance: float  # per game
    pentanomial_variance: float | None  # per game: twice a pair average's

    @property
    def sigma(self) -> float:
        """Per-game standard deviation: from the pairs when there are any."""
        if self.pentanomial_variance is not None:
            return math.sqrt(self.pentanomial_variance)
        return math.sqrt(self.trinomial_variance)


def spread_of(ldw: Sequence[float], pentanomial: Sequence[float] | None) -> Spread:
    """The spread of a run's results ([L, D, W] and, if it has pairs, its pentanomial)."""
    counts = regularize(ldw)
    _, pdf3 = results_to_pdf(ldw)
    variance3 = moments(pdf3)[1]
    variance5 = None
    if pentanomial is not None and sum(pentanomial) > 0:
        _, pdf5 = results_to_pdf(pentanomial)
        variance5 = 2.0 * moments(pdf5)[1]
    return Spread(counts[1] / sum(counts), draw_elo(ldw), variance3, variance5)


def bounds_in_models(
    elo_model: str, elo0: float, elo1: float, spread: Spread
) -> tuple[BoundInModels, BoundInModels]:
    """(H0, H1) of an SPRT with bounds in `elo_model` (BayesElo, logistic or
    normalized), in every model, for a run of this spread."""
    return (
        _bound_in_models(elo_model, elo0, spread),
        _bound_in_models(elo_model, elo1, spread),
    )


def _bound_in_models(elo_model: str, elo: float, spread: Spread) -> BoundInModels:
    bayeselo: float | None = None
    if elo_model == "BayesElo":
        bayeselo, elo, elo_model = elo, bayeselo_to_elo(elo, spread.drawelo), "logistic"
    if elo_model == "logistic":
        score = score_from_elo(elo)
        normalized = NELO_DIVIDED_BY_NT * (score - 0.5) / spread.sigma
        # BayesElo from the trinomial view of the same logistic bound.
        logistic_3 = elo
    elif elo_model == "normalized":
        normalized = elo
        score = 0.5 + elo / NELO_DIVIDED_BY_NT * spread.sigma
        elo = elo_from_score(score)
        logistic_3 = elo_from_score(
            0.5 + normalized / NELO_DIVIDED_BY_NT * math.sqrt(spread.trinomial_variance)
        )
    else:
        raise ValueError(f"unknown Elo model {elo_model!r}")
    if bayeselo is None:
        bayeselo = elo_to_bayeselo(logistic_3, spread.draw_ratio)
    return BoundInModels(elo, normalized, bayeselo, score)


def elo_to_bayeselo(elo: float, draw_ratio: float) -> float:
    """The BayesElo with the expected score of logistic `elo` at this draw ratio
    (NaN when no win and loss probabilities give both)."""
    if draw_ratio < 0.0:
        raise ValueError("the draw ratio must not be negative")
    p_win = score_from_elo(elo) - draw_ratio / 2.0
    p_loss = 1.0 - draw_ratio - p_win
    if p_win <= 0.0 or p_loss <= 0.0:
        return math.nan
    return 200.0 * math.log10(p_win / p_loss * (1.0 - p_loss) / (1.0 - p_win))


@dataclass(frozen=True, slots=True)
class RmsBias:
    variance_ratio: float  # pentanomial over trinomial, per game
    variance_difference: float  # trinomial less pentanomial, per game
    bias: float  # as a score above ½ (0 when pairs vary more than single games)
    elo: float  # the same in logistic Elo


def rms_bias(spread: Spread) -> RmsBias | None:
    """What pairing took out of a run's variance; None for a run without pairs."""
    if spread.pentanomial_variance is None:
        return None
    difference = spread.trinomial_variance - spread.pentanomial_variance
    bias = math.sqrt(difference) if difference >= 0.0 else 0.0
    ratio = spread.pentanomial_variance / spread.trinomial_variance
    return RmsBias(ratio, difference, bias, elo_from_score(0.5 + bias))
