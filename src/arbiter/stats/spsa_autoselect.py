"""SPSA hyperparameters chosen for the tuner, as the reference's "Autoselect".

Given each parameter's interval, the gains are set so that the tune ends
within PRECISION Elo of the optimum with 95% probability, assuming the Elo
is a quadratic function of the parameters that varies by ELO_PER_INTERVAL
over each parameter's interval (van den Bergh's analysis of SPSA with
constant gains: A = alpha = gamma = 0). Per parameter, c is a sixth of its
interval; r is the same for all, smaller as there are more parameters (the
95% quantile of χ² with one degree of freedom a parameter) and as games are
more decisive; the number of games is LAMBDA_RATIO times the time constant
of the slowest parameter (with these choices every parameter has the same).

How decisive games are comes from the time control: the "virtual" draw
ratio of the UHO_4060_v4 book (1 − 4 × the pentanomial variance per game),
fitted by the reference as a logistic of the log of the seconds per move.
Pure.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from arbiter.stats._math import brent, chi2_sf
from arbiter.stats.elo import NELO_DIVIDED_BY_NT

PRECISION = 0.5  # Elo from the optimum at the end, with 95% probability
ELO_PER_INTERVAL = 2.0  # the assumed Elo variation over a parameter's interval
C_RATIO = 1.0 / 6.0  # c as a share of the interval
LAMBDA_RATIO = 3.0  # games as multiples of the time constant
MOVES_PER_GAME = 68  # the clock of a game without moves/ is spread over these
# The reference's fit of the UHO_4060_v4 book's virtual draw ratio.
_DRAW_SLOPE, _DRAW_INTERCEPT = 0.22, 1.35


@dataclass(frozen=True, slots=True)
class Interval:
    name: str
    start: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class TunedParam:
    name: str
    start: float
    low: float
    high: float
    c: float
    r: float

    def line(self) -> str:
        """As the form and the reference write a parameter: name,start,min,max,c,r."""
        return f"{self.name},{self.start:g},{self.low:g},{self.high:g},{self.c:.2f},{self.r:.5f}"


@dataclass(frozen=True, slots=True)
class Autoselection:
    params: tuple[TunedParam, ...]
    num_games: float  # before rounding to the games a run may have


def seconds_per_move(seconds: float, increment: float, moves: int | None) -> float:
    """A clock's time per move: the base time over its moves (or a game's), plus
    the increment."""
    return seconds / (moves or MOVES_PER_GAME) + increment


def virtual_draw_ratio(per_move: float) -> float:
    """The book's virtual draw ratio at `per_move` seconds a move."""
    if per_move <= 0.0:
        raise ValueError("the time control gives no time per move")
    x = _DRAW_SLOPE * math.log(per_move) + _DRAW_INTERCEPT
    return 1.0 / (1.0 + math.exp(-x))


def chi2_quantile_95(degrees: int) -> float:
    """The x with P(χ²(degrees) > x) = 5%."""
    high = degrees + 10.0 * math.sqrt(2.0 * degrees) + 10.0
    return brent(lambda x: chi2_sf(x, degrees) - 0.05, 0.0, high)


def autoselect(intervals: Sequence[Interval], draw_ratio: float) -> Autoselection:
    """Gains and length of a constant-gain SPSA over `intervals` at this draw ratio."""
    if not intervals:
        raise ValueError("no parameters to tune")
    if not 0.0 <= draw_ratio < 1.0:
        raise ValueError("the draw ratio must be in [0, 1)")
    quantile = chi2_quantile_95(len(intervals))
    r = PRECISION / (NELO_DIVIDED_BY_NT * quantile * (1.0 - draw_ratio) / 8.0)
    params, longest = [], 0.0
    for interval in intervals:
        width = interval.high - interval.low
        if not width > 0.0:
            raise ValueError(f"{interval.name}: its maximum must be above its minimum")
        c = C_RATIO * width
        curvature = -2.0 * ELO_PER_INTERVAL / (width / 2.0) ** 2
        time_constant = -NELO_DIVIDED_BY_NT / (2.0 * r * c * c * curvature)
        longest = max(longest, LAMBDA_RATIO * time_constant)
        params.append(TunedParam(interval.name, interval.start, interval.low, interval.high, c, r))
    return Autoselection(tuple(params), longest)
