"""Time controls of a game: `[moves/]seconds[+increment]` or `N=<nodes>` per move,
and the clock that enforces one. Pure.
"""

import re
from dataclasses import dataclass, replace

_CLOCK = re.compile(r"(?:([1-9]\d*)/)?(\d+(?:\.\d+)?)(?:\+(\d+(?:\.\d+)?))?")
_NODES = re.compile(r"N=([1-9]\d*)")

# A fixed-nodes search that has not answered after this long (plus one second
# per NODES_PER_SECOND_FLOOR nodes) is stalled: no sane engine is that slow.
STALL_SECONDS = 10.0
NODES_PER_SECOND_FLOOR = 20_000


@dataclass(frozen=True, slots=True)
class TimeControl:
    """`moves` per period (None: the whole game), seconds, increment; or nodes."""

    moves: int | None
    seconds: float
    increment: float
    nodes: int | None = None

    @property
    def is_nodes(self) -> bool:
        return self.nodes is not None

    def scaled(self, factor: float) -> "TimeControl":
        """Clock times multiplied by `factor` (a machine's speed ratio); a node
        count is the same work on every machine, so it is not scaled."""
        if self.nodes is not None:
            return self
        return replace(
            self,
            seconds=round(self.seconds * factor, 3),
            increment=round(self.increment * factor, 3),
        )

    def text(self) -> str:
        if self.nodes is not None:
            return f"N={self.nodes}"
        clock = f"{self.seconds:g}" + (f"+{self.increment:g}" if self.increment else "")
        return f"{self.moves}/{clock}" if self.moves else clock

    def pgn_tag(self) -> str:
        """The PGN TimeControl tag: `moves/seconds`, `seconds+inc`, or `-` for nodes."""
        if self.nodes is not None:
            return "-"
        if self.moves:
            return f"{self.moves}/{self.seconds:g}"
        return f"{self.seconds:g}+{self.increment:g}" if self.increment else f"{self.seconds:g}"

    def stall_seconds(self) -> float:
        nodes = self.nodes or 0
        return STALL_SECONDS + nodes / NODES_PER_SECOND_FLOOR


def parse_time_control(text: str) -> TimeControl:
    """ValueError naming the text when it is neither form."""
    nodes = _NODES.fullmatch(text.strip())
    if nodes is not None:
        return TimeControl(None, 0.0, 0.0, int(nodes.group(1)))
    match = _CLOCK.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a time control ([moves/]seconds[+inc] or N=<nodes>)")
    moves, seconds, increment = match.groups()
    parsed = TimeControl(int(moves) if moves else None, float(seconds), float(increment or 0))
    if parsed.seconds == 0 and parsed.increment == 0:
        raise ValueError(f"{text!r} gives no time at all")
    return parsed


class Clock:
    """One side's clock. Time is charged per move as measured by the runner."""

    def __init__(self, tc: TimeControl) -> None:
        self.tc = tc
        self.remaining = tc.seconds  # the increment comes after each move
        self.moves_left = tc.moves

    def spend(self, elapsed: float, margin: float) -> bool:
        """Charge one move; False when it overstepped the time left (+ margin)."""
        if self.tc.nodes is not None:
            return True
        if elapsed > self.remaining + margin:
            return False
        self.remaining = max(0.0, self.remaining - elapsed) + self.tc.increment
        if self.moves_left is not None:
            self.moves_left -= 1
            if self.moves_left == 0:
                self.remaining += self.tc.seconds
                self.moves_left = self.tc.moves
        return True

    def deadline(self, margin: float) -> float:
        """Seconds this move may take before the side has lost (or is stalled)."""
        if self.tc.nodes is not None:
            return self.tc.stall_seconds()
        return self.remaining + margin


def go_command(white: Clock, black: Clock, white_to_move: bool) -> str:
    """`go nodes N` for a fixed-nodes side, else `go wtime .. btime .. winc .. binc ..`."""
    mover = white if white_to_move else black
    if mover.tc.nodes is not None:
        return f"go nodes {mover.tc.nodes}"
    parts = [
        f"go wtime {_ms(white.remaining)} btime {_ms(black.remaining)}",
        f"winc {_ms(white.tc.increment)} binc {_ms(black.tc.increment)}",
    ]
    if mover.moves_left is not None:
        parts.append(f"movestogo {mover.moves_left}")
    return " ".join(parts)


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))
