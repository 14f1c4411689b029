"""The reference's resign and draw adjudication rules."""

from arbiter.worker.match.adjudication import AdjudicationRules, Adjudicator


def test_resign_after_three_own_moves_at_minus_600() -> None:
    judge = Adjudicator()
    plies = 10
    for _ in range(2):
        assert judge.record(True, -650, plies) is None
        assert judge.record(False, 650, plies) is None
    assert judge.record(True, -600, plies) == "resign"


def test_a_better_score_resets_the_resign_count() -> None:
    judge = Adjudicator()
    judge.record(True, -700, 10)
    judge.record(True, -700, 12)
    judge.record(True, -100, 14)
    assert judge.record(True, -700, 16) is None
    assert judge.record(True, None, 18) is None  # no score: no streak
    assert judge.record(True, -700, 20) is None


def test_draw_needs_both_sides_quiet_for_eight_moves_after_move_34() -> None:
    judge = Adjudicator()
    for ply in range(16):
        verdict = judge.record(ply % 2 == 0, 10, 40 + ply)
    assert verdict is None  # 40..55 plies is before move 34
    judge = Adjudicator()
    verdicts = [judge.record(ply % 2 == 0, 0, 68 + ply) for ply in range(16)]
    assert verdicts[:15] == [None] * 15
    assert verdicts[15] == "draw"


def test_one_noisy_side_prevents_the_draw() -> None:
    judge = Adjudicator()
    verdicts = [
        judge.record(ply % 2 == 0, 0 if ply % 2 == 0 else 50, 80 + ply) for ply in range(30)
    ]
    assert set(verdicts) == {None}


def test_custom_rules() -> None:
    judge = Adjudicator(AdjudicationRules(resign_moves=1, resign_score=100))
    assert judge.record(False, -100, 2) == "resign"
