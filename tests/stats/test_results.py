"""Result consistency checks and their messages."""

import pytest

from arbiter.stats import InconsistentResultsError, check_results, result_problems


def test_coherent_results_pass() -> None:
    # pairs: LL=1, LD=2, DD+WL=3 (say 2 DD, 1 WL), WD=2, WW=1 -> 18 games
    wins, losses, draws = 2 * 1 + 2 + 1, 2 * 1 + 2 + 1, 2 + 2 * 2 + 2
    assert result_problems(wins, losses, draws, [1, 2, 3, 2, 1]) == []
    check_results(wins, losses, draws, [1, 2, 3, 2, 1], batch_size=3)


def test_game_count_mismatch() -> None:
    (message,) = result_problems(5, 5, 9, [1, 2, 3, 2, 1])[1:]
    assert "19 games but the pentanomial counts 9 pairs" in message


def test_odd_games_and_win_loss_identity() -> None:
    problems = result_problems(3, 0, 0, [0, 0, 0, 0, 1])
    assert any("odd number of games (3)" in p for p in problems)
    assert any("wins-losses = 3" in p for p in problems)


def test_draw_bounds() -> None:
    # two pairs of WL (score 1 each): W=2, L=2, D=0 allowed; D=2 with W=L=1 also allowed
    assert result_problems(2, 2, 0, [0, 0, 2, 0, 0]) == []
    assert result_problems(1, 1, 2, [0, 0, 2, 0, 0]) == []
    # LD + WD pairs force at least 2 draws
    problems = result_problems(1, 1, 0, [0, 1, 0, 1, 0])
    assert any("draws = 0 is outside" in p for p in problems)


def test_batch_size() -> None:
    problems = result_problems(2, 2, 0, [0, 0, 2, 0, 0], batch_size=4)
    assert problems == ["2 game pairs is incompatible with the SPRT batch size of 4 pairs"]


def test_shape_and_sign() -> None:
    assert "5 entries" in result_problems(0, 0, 0, [0, 0, 0])[0]
    assert "negative" in result_problems(0, 0, 0, [0, -1, 0, 0, 0])[0]
    assert "wins=-1" in result_problems(-1, 0, 0, [0, 0, 0, 0, 0])[0]


def test_check_raises_with_all_messages() -> None:
    with pytest.raises(InconsistentResultsError, match="incompatible stats: odd number"):
        check_results(3, 0, 0, [0, 0, 0, 0, 1])
