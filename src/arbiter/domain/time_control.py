"""A run's time control: `[moves/]seconds[+increment]` or `N=<nodes>` per move,
parsed and priced (the estimated length of a game, which sizes tasks and
prices CPU time). Pure."""

import re
from dataclasses import dataclass

from arbiter.domain.errors import ValidationError
from arbiter.stats.scheduling import REFERENCE_NPS, game_duration

MAX_NODES = 10**10

_TIME_TC = re.compile(r"([1-9]\d*/)?\d+(\.\d+)?(\+\d+(\.\d+)?)?", re.ASCII)
_NODES_TC = re.compile(r"N=([1-9]\d*)", re.ASCII)


@dataclass(frozen=True, slots=True)
class TimeControl:
    """A parsed `tc`: `[moves/]seconds[+increment]`, or `N=<nodes>` per move.

    `moves` is None for a whole-game clock; `nodes` is None for a clock.
    """

    moves: int | None
    seconds: float
    increment: float
    nodes: int | None = None

    def game_duration(self) -> float:
        """Estimated seconds per game (reference 4.5).

        Clock: (time + 68·inc, a moves/time clock scaled by 68/moves) × 2 × 0.92.
        Fixed nodes: we price a move like an increment of nodes / 628,000 s,
        the reference speed workers are calibrated against (stats.scheduling);
        that keeps node-limited runs comparable with clock runs when tasks are
        sized. The Python match runner's per-move overhead is not counted.
        """
        return game_duration(self.scheduling_tc())

    def scheduling_tc(self) -> str:
        """A clock string with the same duration estimate, for the stats
        scheduling functions (which take `[moves/]time[+inc]` strings)."""
        if self.nodes is not None:
            return f"0+{_plain(self.nodes / REFERENCE_NPS)}"
        text = f"{_plain(self.seconds)}+{_plain(self.increment)}"
        return f"{self.moves}/{text}" if self.moves else text


def _plain(value: float) -> str:
    # Never an exponent ("1e+06" is no time control); microseconds suffice.
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def parse_time_control(text: str, field: str = "tc") -> TimeControl:
    """Parse a time control; ValidationError(field, ...) when it is not one."""
    nodes = _NODES_TC.fullmatch(text)
    if nodes is not None:
        count = int(nodes.group(1))
        if count > MAX_NODES:
            raise ValidationError(field, f"at most {MAX_NODES:,} nodes per move")
        return TimeControl(None, 0.0, 0.0, count)
    if _TIME_TC.fullmatch(text) is None:
        raise ValidationError(
            field,
            f"{text!r} is not a time control: write [moves/]seconds[+increment] "
            "(e.g. 10+0.1, 40/20) or N=<nodes per move> (e.g. N=25000)",
        )
    head, _, inc = text.partition("+")
    moves, _, seconds = head.rpartition("/")
    parsed = TimeControl(int(moves) if moves else None, float(seconds), float(inc or 0))
    if parsed.seconds == 0 and parsed.increment == 0:
        raise ValidationError(field, f"{text!r} gives the engines no time at all")
    return parsed
