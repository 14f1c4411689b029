"""Counting a match from the new engine's side: W/L/D, faults, pentanomial. Pure.

A pair is two games from one opening with colours swapped; its score for the
new engine, 0 to 2 in half points, indexes the pentanomial
[LL, LD, DD+WL, WD, WW].
"""

from dataclasses import dataclass, field

from arbiter.protocol.messages import Stats
from arbiter.worker.match.game import DRAW, WHITE_WINS, Fault, GameRecord


def new_points(game: GameRecord, new_is_white: bool) -> float:
    """1, 0.5 or 0: the new engine's score in this game."""
    if game.result == DRAW:
        return 0.5
    return 1.0 if (game.result == WHITE_WINS) == new_is_white else 0.0


def pentanomial_index(points: float) -> int:
    """0..4 for a pair score of 0, 0.5, 1, 1.5, 2."""
    return round(points * 2)


@dataclass(slots=True)
class MatchStats:
    wins: int = 0
    losses: int = 0
    draws: int = 0
    crashes: int = 0  # crashes and stalls, of either engine
    time_losses: int = 0
    illegal_moves: int = 0
    pentanomial: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.draws

    def add_pair(self, games: tuple[GameRecord, GameRecord]) -> None:
        """Count a pair: the new engine is white in the first game, black in the second."""
        total = 0.0
        for game, new_is_white in zip(games, (True, False), strict=True):
            points = new_points(game, new_is_white)
            total += points
            if points == 1.0:
                self.wins += 1
            elif points == 0.0:
                self.losses += 1
            else:
                self.draws += 1
            if game.fault in (Fault.CRASH, Fault.STALL):
                self.crashes += 1
            elif game.fault is Fault.TIME:
                self.time_losses += 1
            elif game.fault is Fault.ILLEGAL:
                self.illegal_moves += 1
        self.pentanomial[pentanomial_index(total)] += 1

    def minus(self, earlier: "MatchStats") -> "MatchStats":
        """What was played since `earlier` (a copy taken before)."""
        return MatchStats(
            self.wins - earlier.wins,
            self.losses - earlier.losses,
            self.draws - earlier.draws,
            self.crashes - earlier.crashes,
            self.time_losses - earlier.time_losses,
            self.illegal_moves - earlier.illegal_moves,
            [a - b for a, b in zip(self.pentanomial, earlier.pentanomial, strict=True)],
        )

    def copy(self) -> "MatchStats":
        return MatchStats(
            self.wins,
            self.losses,
            self.draws,
            self.crashes,
            self.time_losses,
            self.illegal_moves,
            list(self.pentanomial),
        )

    def on_top_of(self, earlier: Stats) -> Stats:
        """The task's cumulative stats: what was reported before this process
        took the task over, plus what it played."""
        return Stats(
            wins=earlier.wins + self.wins,
            losses=earlier.losses + self.losses,
            draws=earlier.draws + self.draws,
            crashes=earlier.crashes + self.crashes,
            time_losses=earlier.time_losses + self.time_losses,
            pentanomial=[a + b for a, b in zip(earlier.pentanomial, self.pentanomial, strict=True)],
        )
