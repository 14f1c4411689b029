"""Time controls: parsed, refused with the field named, and priced as the
reference prices a game."""

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.time_control import TimeControl, parse_time_control
from arbiter.stats.scheduling import game_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10+0.1", TimeControl(None, 10.0, 0.1)),
        ("60+0.6", TimeControl(None, 60.0, 0.6)),
        ("40/20", TimeControl(40, 20.0, 0.0)),
        ("40/20+0.5", TimeControl(40, 20.0, 0.5)),
        ("0+0.1", TimeControl(None, 0.0, 0.1)),
        ("7.5", TimeControl(None, 7.5, 0.0)),
        ("N=25000", TimeControl(None, 0.0, 0.0, 25000)),
    ],
)
def test_parse_time_control(text: str, expected: TimeControl) -> None:
    assert parse_time_control(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "fast", "10+", "+0.1", "0/10+0.1", "10+0.1+1", "1e3", "N=0", "N=-5", "N=1.5", "0+0"],
)
def test_bad_time_controls(text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_time_control(text, "new_tc")
    assert caught.value.field == "new_tc"


def test_game_duration_follows_the_reference() -> None:
    # (time + 68·inc) × 2 × 0.92
    assert parse_time_control("10+0.1").game_duration() == pytest.approx((10 + 6.8) * 1.84)
    # moves/time scaled by 68/moves
    assert parse_time_control("40/20").game_duration() == pytest.approx(20 * 68 / 40 * 1.84)
    assert parse_time_control("60+0.6").game_duration() == pytest.approx(game_duration("60+0.6"))


def test_fixed_nodes_are_priced_at_the_reference_speed() -> None:
    tc = parse_time_control("N=628000")
    # One second per move at 628,000 nodes/s, 68 moves, two engines, 92%.
    assert tc.game_duration() == pytest.approx(68 * 1.84)
    assert game_duration(tc.scheduling_tc()) == pytest.approx(tc.game_duration())


def test_scheduling_tc_round_trips_clocks() -> None:
    for text in ("10+0.1", "40/20+0.5", "7.5", "1000000+0.000001"):
        tc = parse_time_control(text)
        assert parse_time_control(tc.scheduling_tc()) == tc
