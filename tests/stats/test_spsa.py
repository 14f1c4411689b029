"""SPSA parsing, schedules (reference §6 check values), flips, updates and history."""

import random
import zlib

import pytest

from arbiter.stats import (
    SpsaParseError,
    draw_flips,
    engine_values,
    flips_signature,
    gains,
    history_due,
    history_sample,
    make_schedule,
    pack_flips,
    parse_params,
    unpack_flips,
    update_thetas,
)
from arbiter.stats.spsa import history_period

SCHEDULE = make_schedule(60000)


def test_schedule_check_values() -> None:
    (param,) = parse_params("KnightValue, 0, -10, 10, 2, 0.002\n", SCHEDULE)
    assert SCHEDULE.num_iter == 30000
    assert SCHEDULE.big_a == 3000
    assert param.c == pytest.approx(5.66525, rel=1e-5)
    assert param.a == pytest.approx(4.19987, rel=1e-5)
    assert param.a_end == pytest.approx(0.008)
    assert gains(param, 0, SCHEDULE)[1] == pytest.approx(0.00105556, rel=1e-5)
    c_last, r_last = gains(param, 29999, SCHEDULE)
    assert c_last == pytest.approx(2.0, rel=1e-12)
    assert r_last == pytest.approx(0.002, rel=1e-12)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("a,1,0,2,1", "line 1: expected 6 comma-separated fields"),
        ("a,1,0,2,1,0.1\n\nb,x,0,2,1,0.1", "line 3: start 'x' is not a number"),
        ("a,1,0,2,0,0.1", "line 1: c_end must be > 0"),
        ("a,1,0,2,1,-0.1", "line 1: r_end must be >= 0"),
        ("a,5,0,2,1,0.1", "line 1: start 5 is not within"),
        (" ,1,0,2,1,0.1", "line 1: the parameter name is empty"),
        ("a,1,0,2,1,0.1\na,1,0,2,1,0.1", "line 2: parameter 'a' is defined twice"),
        ("a,nan,0,2,1,0.1", "line 1: start must be finite"),
        ("\n\n", "no parameters"),
    ],
)
def test_parse_errors(raw: str, message: str) -> None:
    with pytest.raises(SpsaParseError, match=message):
        parse_params(raw, SCHEDULE)


def test_flips_pack_and_signature() -> None:
    flips = draw_flips(11, random.Random(5))
    assert set(flips) <= {-1, 1}
    packed = pack_flips(flips)
    assert len(packed) == 2
    assert unpack_flips(packed, 11) == flips
    assert pack_flips([1, -1, -1, -1, -1, -1, -1, 1, 1]) == bytes([0x81, 0x80])
    assert flips_signature(packed) == zlib.crc32(packed)


def test_engine_values_clip_and_update() -> None:
    params = parse_params("a,9.5,0,10,2,0.002\nb,0,-10,10,1,0.01", SCHEDULE)
    white, black = engine_values(params, [1, -1], 29999, SCHEDULE)
    assert white == [10.0, -1.0]
    assert black == [7.5, 1.0]
    updated = update_thetas(params, [1, -1], 29999, 3, SCHEDULE)
    # θ += R_k·c_k·(W − L)·flip with R_k = r_end, c_k = c_end at the last iteration
    assert updated[0].theta == pytest.approx(9.5 + 0.002 * 2 * 3)
    assert updated[1].theta == pytest.approx(0.0 - 0.01 * 1 * 3)
    assert update_thetas(params, [1, -1], 29999, 500, SCHEDULE)[0].theta == 10.0


def test_history() -> None:
    assert history_period(30000, 5) == 300
    assert history_period(30000, 200) == 600
    assert history_period(30000, 2000) == 30000
    assert history_due(0, 300, 30000, 5)
    assert not history_due(1, 599, 30000, 5)
    params = parse_params("a,1,0,2,1,0.1", SCHEDULE)
    (sample,) = history_sample(params, 0, SCHEDULE)
    assert set(sample) == {"theta", "R", "c"}
