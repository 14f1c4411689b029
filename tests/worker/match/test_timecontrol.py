"""Time controls: parsing, scaling, the clock and the `go` command."""

import pytest

from arbiter.worker.match.timecontrol import (
    STALL_SECONDS,
    Clock,
    TimeControl,
    go_command,
    parse_time_control,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10+0.1", TimeControl(None, 10.0, 0.1)),
        ("60", TimeControl(None, 60.0, 0.0)),
        ("40/20", TimeControl(40, 20.0, 0.0)),
        ("40/20+0.5", TimeControl(40, 20.0, 0.5)),
        ("N=1000", TimeControl(None, 0.0, 0.0, 1000)),
    ],
)
def test_parse(text: str, expected: TimeControl) -> None:
    assert parse_time_control(text) == expected
    assert parse_time_control(text).text() == text


@pytest.mark.parametrize("text", ["", "abc", "0+0", "N=0", "N=-5", "10+", "/10"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="time"):
        parse_time_control(text)


def test_scaling_multiplies_clocks_but_not_nodes() -> None:
    assert parse_time_control("10+0.1").scaled(2.0933) == TimeControl(None, 20.933, 0.209)
    assert parse_time_control("40/20").scaled(0.5) == TimeControl(40, 10.0, 0.0)
    nodes = parse_time_control("N=5000")
    assert nodes.scaled(3.0) == nodes


def test_pgn_tags() -> None:
    assert parse_time_control("10+0.1").pgn_tag() == "10+0.1"
    assert parse_time_control("40/20").pgn_tag() == "40/20"
    assert parse_time_control("N=10").pgn_tag() == "-"


def test_clock_charges_time_and_adds_increment() -> None:
    clock = Clock(parse_time_control("10+0.1"))
    assert clock.spend(1.0, margin=0.0)
    assert clock.remaining == pytest.approx(9.1)
    assert not clock.spend(9.2, margin=0.05)  # flag fell
    assert clock.spend(9.12, margin=0.05)  # within the margin: still on time


def test_moves_per_period_refill_the_clock() -> None:
    clock = Clock(parse_time_control("2/10"))
    assert clock.spend(4.0, 0.0)
    assert clock.moves_left == 1
    assert clock.spend(4.0, 0.0)
    assert clock.moves_left == 2
    assert clock.remaining == pytest.approx(12.0)


def test_nodes_never_flag_and_have_a_stall_deadline() -> None:
    clock = Clock(parse_time_control("N=40000"))
    assert clock.spend(1000.0, 0.0)
    assert clock.deadline(0.05) == pytest.approx(STALL_SECONDS + 2.0)


def test_go_command() -> None:
    white, black = Clock(parse_time_control("10+0.1")), Clock(parse_time_control("5+0.05"))
    assert go_command(white, black, True) == "go wtime 10000 btime 5000 winc 100 binc 50"
    moves = Clock(parse_time_control("40/20"))
    assert go_command(moves, moves, False).endswith("movestogo 40")
    nodes = Clock(parse_time_control("N=1234"))
    assert go_command(nodes, white, True) == "go nodes 1234"
