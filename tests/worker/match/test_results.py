"""Counting pairs from the new engine's side: W/L/D, faults, pentanomial."""

import chess
import pytest

from arbiter.protocol.messages import Stats
from arbiter.worker.match.game import DRAW, Fault, GameRecord, Opening
from arbiter.worker.match.results import MatchStats, new_points, pentanomial_index


def game(result: str, fault: Fault | None = None) -> GameRecord:
    return GameRecord(
        white="x",
        black="y",
        opening=Opening(chess.STARTING_FEN),
        moves=(),
        result=result,
        termination="test",
        fault=fault,
        fault_white=False,
        chess960=False,
        duration=0.0,
        thinking=0.0,
    )


def test_points_follow_colour() -> None:
    assert new_points(game("1-0"), new_is_white=True) == 1.0
    assert new_points(game("1-0"), new_is_white=False) == 0.0
    assert new_points(game("0-1"), new_is_white=False) == 1.0
    assert new_points(game(DRAW), new_is_white=True) == 0.5


@pytest.mark.parametrize(
    ("first", "second", "index"),
    [
        ("0-1", "1-0", 0),  # new lost both
        ("0-1", DRAW, 1),
        (DRAW, DRAW, 2),
        ("1-0", "1-0", 2),  # won with white, lost with black: WL
        ("1-0", DRAW, 3),
        ("1-0", "0-1", 4),  # won both
    ],
)
def test_pentanomial(first: str, second: str, index: int) -> None:
    stats = MatchStats()
    stats.add_pair((game(first), game(second)))
    expected = [0] * 5
    expected[index] = 1
    assert stats.pentanomial == expected
    assert stats.games == 2


def test_faults_are_counted_by_kind() -> None:
    stats = MatchStats()
    stats.add_pair((game("0-1", Fault.CRASH), game("0-1", Fault.STALL)))
    stats.add_pair((game("1-0", Fault.TIME), game("1-0", Fault.ILLEGAL)))
    assert (stats.crashes, stats.time_losses, stats.illegal_moves) == (2, 1, 1)
    assert (stats.wins, stats.losses, stats.draws) == (2, 2, 0)
    assert pentanomial_index(1.0) == 2


def test_on_top_of_and_minus() -> None:
    earlier = Stats(1, 2, 3, 0, 1, [0, 1, 1, 1, 0])
    stats = MatchStats()
    stats.add_pair((game("1-0"), game("0-1")))
    snapshot = stats.copy()
    stats.add_pair((game(DRAW), game(DRAW)))
    total = stats.on_top_of(earlier)
    assert (total.wins, total.losses, total.draws, total.time_losses) == (3, 2, 5, 1)
    assert total.pentanomial == [0, 1, 2, 1, 1]
    since = stats.minus(snapshot)
    assert (since.wins, since.draws, since.pentanomial) == (0, 2, [0, 0, 1, 0, 0])
