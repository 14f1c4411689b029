"""Sequential SPRT: reference rows 12-14, 25-26, and the contract-violation paths."""

import json

import pytest

from arbiter.stats import new_sprt, overshoot_corrections, sprt_results, update_sprt
from tests.stats.support import close, simulate


@pytest.mark.parametrize(
    ("penta", "llr", "state", "last", "skipped"),
    [
        ([1200, 18000, 35000, 19500, 1500], 18.844699201784373, "accepted", 75200, 75199),
        ([1500, 19500, 35000, 18000, 1200], -23.826023265489667, "rejected", 75200, 75199),
        ([200, 2000, 4000, 2050, 210], 0.41453541199350474, "", 8460, 8459),
    ],
)
def test_single_update_rows_12_to_14(penta, llr, state, last, skipped) -> None:  # type: ignore[no-untyped-def]
    result = update_sprt(new_sprt(0.05, 0.05, 0, 2, elo_model="normalized"), penta)
    assert result["llr"] == close(llr)
    assert result["state"] == state
    assert result["overshoot"]["last_update"] == last
    assert result["overshoot"]["skipped_updates"] == skipped
    assert overshoot_corrections(result) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("probs", "seed", "penta", "llr", "state", "o0", "o1", "bounds"),
    [
        (
            [0.02, 0.24, 0.48, 0.24, 0.02],
            1,
            [1861, 22236, 44137, 22141, 1913],
            -2.9669048895416807,
            "rejected",
            0.02274063714605618,
            0.022544662262011808,
            (-2.921698342020384, 2.9218943169044285),
        ),
        (
            [0.015, 0.22, 0.49, 0.25, 0.025],
            7,
            [130, 1756, 3777, 1959, 186],
            2.9548238277017393,
            "accepted",
            0.020903785074837294,
            0.019390250879324472,
            (-2.923535194091603, 2.925048728287116),
        ),
    ],
)
def test_sequential_rows_25_26(probs, seed, penta, llr, state, o0, o1, bounds) -> None:  # type: ignore[no-untyped-def]
    final_penta, final = simulate(probs, seed)
    assert final_penta == penta
    assert sum(final_penta) == final["overshoot"]["last_update"]
    assert final["llr"] == close(llr)
    assert final["state"] == state
    got0, got1 = overshoot_corrections(final)
    assert got0 == close(o0)
    assert got1 == close(o1)
    assert final["lower_bound"] + got0 == close(bounds[0])
    assert final["upper_bound"] - got1 == close(bounds[1])
    assert final["overshoot"]["skipped_updates"] == 0


def test_update_does_not_mutate_and_round_trips_json() -> None:
    state = new_sprt(0.05, 0.05, 0, 2, elo_model="normalized", batch_size=2)
    after = update_sprt(state, [1, 1, 0, 0, 0])
    assert state["overshoot"]["last_update"] == 0
    restored = json.loads(json.dumps(after))
    assert restored == after
    assert update_sprt(restored, [1, 1, 1, 1, 0]) == update_sprt(after, [1, 1, 1, 1, 0])
    assert set(after) == {
        "alpha", "beta", "elo0", "elo1", "elo_model", "state", "llr",
        "batch_size", "lower_bound", "upper_bound", "overshoot",
    }  # fmt: skip


def test_lost_samples_drop_overshoot() -> None:
    state = new_sprt(batch_size=1)
    state = update_sprt(state, [10, 20, 30, 20, 10])
    state = update_sprt(state, [10, 20, 30, 20, 5])
    assert state["lost_samples"] == 5
    assert "overshoot" not in state
    again = update_sprt(state, [10, 20, 30, 20, 11])
    assert "overshoot" not in again
    assert again["lost_samples"] == 5


def test_illegal_update_is_recorded() -> None:
    state = update_sprt(new_sprt(batch_size=4), [1, 2, 3, 2, 1])
    assert state["illegal_update"] == 9
    assert "overshoot" not in state


def test_same_data_twice_changes_nothing() -> None:
    once = update_sprt(new_sprt(batch_size=1), [1, 2, 3, 2, 1])
    assert update_sprt(once, [1, 2, 3, 2, 1]) == once


def test_overshoot_tracks_new_extremes() -> None:
    state = new_sprt(elo_model="logistic", batch_size=1)
    state = update_sprt(state, [0, 0, 0, 0, 1])
    state = update_sprt(state, [1, 0, 0, 0, 1])
    o = state["overshoot"]
    assert o["skipped_updates"] == 0
    assert o["m0"] < 0 < o["m1"]
    assert o["sq0"] == pytest.approx(o["m0"] ** 2)


def test_bayeselo_state_uses_trinomial() -> None:
    results = sprt_results("BayesElo", 716, 591, 2163, [1, 2, 3, 4, 5])
    assert results == [591, 2163, 716]
    state = update_sprt(new_sprt(0.05, 0.05, 0, 6, elo_model="BayesElo"), results)
    assert state["llr"] == close(2.994844556312522)
    assert state["state"] == "accepted"
    assert sprt_results("normalized", 1, 1, 1, [1, 2, 3, 4, 5]) == [1, 2, 3, 4, 5]


def test_new_sprt_validates() -> None:
    with pytest.raises(ValueError, match="elo_model"):
        new_sprt(elo_model="elo")
    with pytest.raises(ValueError, match="batch_size"):
        new_sprt(batch_size=0)
