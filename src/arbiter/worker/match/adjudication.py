"""Ending hopeless and dead-drawn games early, with the reference's rules.

Resign: a side whose own score has been at or below -600 cp for its last 3
moves loses. Draw: once 34 full moves are played, if both sides' scores have
been within ±20 cp for each one's last 8 moves, the game is drawn.
(fastchess flags of the reference: `-resign movecount=3 score=600 -draw
movenumber=34 movecount=8 score=20`.) Pure; one Adjudicator per game.
"""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AdjudicationRules:
    resign_moves: int = 3
    resign_score: int = 600
    draw_move_number: int = 34
    draw_moves: int = 8
    draw_score: int = 20


REFERENCE_RULES = AdjudicationRules()


class Adjudicator:
    def __init__(self, rules: AdjudicationRules = REFERENCE_RULES) -> None:
        self.rules = rules
        self._losing = [0, 0]  # consecutive own moves at or below -resign_score, per colour
        self._quiet = [0, 0]  # consecutive own moves within ±draw_score

    def record(self, white: bool, score: int | None, plies: int) -> str | None:
        """After a move by `white` (or black) reporting `score`, with `plies`
        half-moves played in the game: "resign" (the mover loses), "draw", or None."""
        side = 0 if white else 1
        if score is None:  # no evaluation: the streaks cannot go on
            self._losing[side] = 0
            self._quiet[side] = 0
            return None
        rules = self.rules
        self._losing[side] = self._losing[side] + 1 if score <= -rules.resign_score else 0
        self._quiet[side] = self._quiet[side] + 1 if abs(score) <= rules.draw_score else 0
        if self._losing[side] >= rules.resign_moves:
            return "resign"
        if plies // 2 >= rules.draw_move_number and min(self._quiet) >= rules.draw_moves:
            return "draw"
        return None
