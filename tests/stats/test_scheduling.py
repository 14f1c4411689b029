"""Scheduling formulas against the worked examples of reference §5.3."""

import pytest

from arbiter.stats import (
    game_duration,
    internal_throughput,
    max_concurrency_for_memory,
    memory_need,
    min_nps,
    parse_tc,
    scale_tc,
    sprt_batch_size,
    task_size,
    tc_factor,
    tc_ratio,
    worker_task_cap,
)
from tests.stats.support import close

BIG = 10**9


@pytest.mark.parametrize(
    ("tc", "threads", "duration", "ratio", "batch", "sprt8", "sprt16", "fixed8"),
    [
        ("10+0.1", 1, 30.912000000000003, 1.0, 16, 480, 928, 466),
        ("60+0.6", 1, 185.472, 6.0, 3, 78, 156, 78),
        ("5+0.05", 8, 15.456000000000001, 4.0, 4, 120, 232, 116),
        ("20+0.2", 8, 61.824000000000005, 16.0, 1, 30, 58, 30),
        ("180+1.8", 1, 556.4159999999999, 17.999999999999996, 1, 26, 52, 26),
        ("60+0.6", 8, 185.472, 48.0, 1, 10, 20, 10),
        ("40/20", 1, 62.56, 2.0238095238095237, 8, 224, 464, 230),
    ],
)
def test_table(tc, threads, duration, ratio, batch, sprt8, sprt16, fixed8) -> None:  # type: ignore[no-untyped-def]
    assert game_duration(tc) == close(duration)
    assert tc_ratio(tc, threads) == close(ratio)
    assert sprt_batch_size(tc, threads) == batch
    assert task_size(tc, threads, 8, BIG, batch) == sprt8
    assert task_size(tc, threads, 16, BIG, batch) == sprt16
    assert task_size(tc, threads, 8, BIG) == fixed8


def test_task_size_limited_by_remaining() -> None:
    assert task_size("10+0.1", 1, 8, 40, 16) == 64  # remaining rounded up to whole batches
    assert task_size("10+0.1", 1, 8, 40) == 40
    assert task_size("600+6", 1, 1, BIG, 1) == 2  # at least one batch


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((100, 1.0, 1, 0), {}, 97.2972972972973),
        ((100, 6.0, 1, 0), {}, 389.39452820693117),
        ((100, 1.0, 3, 100000), {}, 120.0),
        ((50, tc_ratio("180+1.8"), 1, 0), {}, 455.67132533344466),
        ((100, 1.0, 1, 250000), {"sprt_llr": 2.5, "sprt_elo0": 0.5}, 214.0540540540541),
    ],
)
def test_itp(args, kwargs, expected) -> None:  # type: ignore[no-untyped-def]
    assert internal_throughput(*args, **kwargs) == close(expected)


def test_itp_clamps_throughput() -> None:
    assert internal_throughput(10_000, 1.0, 0, 0) == 500.0
    assert internal_throughput(0, 1.0, 0, 0) == 1.0


def test_memory() -> None:
    assert memory_need(1, 16, 16, 8) == 3612
    assert memory_need(1, 64, 64, 8) == 4380
    assert memory_need(8, 64, 64, 16) == 2296
    assert memory_need(1, 16, 16, 1) == 840
    assert max_concurrency_for_memory(444 + 396 * 3 + 10) == 3


def test_worker_speed() -> None:
    assert tc_factor(628_000) == 1.0
    assert min_nps(1) == 180_000
    assert tc_factor(1_000_000) == pytest.approx(0.628)
    assert min_nps(8) == pytest.approx(57845.88, abs=0.01)
    assert tc_factor(300_000) == pytest.approx(2.0933, abs=1e-4)
    assert min_nps(16) == pytest.approx(46606.34, abs=0.01)
    assert scale_tc("10+0.1", tc_factor(300_000)) == "20.933+0.209"
    assert scale_tc("40/20", 0.5) == "40/10.000"


def test_parse_tc() -> None:
    assert parse_tc("40/20+0.5").moves == 40
    with pytest.raises(ValueError, match="time control"):
        parse_tc("0/10")


# Bit for bit: runs are ranked by (cores + C/2)/itp, so an itp one ulp off the
# reference's can swap two runs. Expected values are the reference's formulas
# evaluated by hand, in the reference's order of operations.


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        # 100 × 36/37 × (1 + 0)
        ((100, 1.0, 1, 0), {}, 97.2972972972973),
        # 100 × 6^0.774 × 36/37: LTC at 60+0.6 is six STC games
        ((100, 6.0, 1, 0), {}, 389.39452820693117),
        # 100 × 36/45 × (1 + 100000/200000)
        ((100, 1.0, 3, 100_000), {}, 120.0),
        # 100 × 36/37 × (1 + (1 + 0.2)): the game bonus is capped at 1
        ((100, 1.0, 1, 250_000), {"sprt_llr": 2.5, "sprt_elo0": 0.5}, 214.0540540540541),
        # 100 × (1 + (0.000735 + 0.2)); adding 0.1 twice would give 120.0735
        ((100, 1.0, 0, 147), {"sprt_llr": 2.5, "sprt_elo0": 0.5}, 120.07350000000001),
        # elo0 not above 0: only 0.1; LLR not above 2: nothing
        ((100, 1.0, 0, 147), {"sprt_llr": 2.5, "sprt_elo0": 0.0}, 110.0735),
        ((100, 1.0, 0, 147), {"sprt_llr": 2.0, "sprt_elo0": 0.5}, 100.0735),
        # a ratio below 1 (very short games) is not a malus
        ((100, 0.5, 0, 0), {}, 100.0),
    ],
)
def test_itp_is_the_references_to_the_last_bit(args, kwargs, expected) -> None:  # type: ignore[no-untyped-def]
    assert internal_throughput(*args, **kwargs) == expected


def test_moves_per_period_scale_as_the_reference_scales_them() -> None:
    # (10 × (68/30)) × 1.84; (10 × 68)/30 would end in ...667
    assert game_duration("30/10") == 41.70666666666666
    assert tc_ratio("30/10") == 41.70666666666666 / 30.912000000000003


def test_task_cap_rounds_half_a_unit_up() -> None:
    # 3+0.25 lasts (3 + 68 × 0.25) × 1.84 = 36.8 s; 23 cores play 1800/36.8 × 23
    # = 1125 games in 30 min, 562.5 pairs: the reference rounds that up to 563.
    assert worker_task_cap("3+0.25", 1, 23) == 1126
    assert task_size("3+0.25", 1, 23, BIG) == 1126
    # 2+0.5 at 161 cores in batches of 7 pairs: 312.5 batches -> 313
    assert worker_task_cap("2+0.5", 1, 161, 7) == 14 * 313
