"""The reference's modify rules, as a pure function."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.modify_rules import (
    Modifiable,
    Modification,
    RunFacts,
    RunKind,
    apply_modification,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def run(
    kind: RunKind = "sprt",
    *,
    approved: bool = True,
    failed: bool = False,
    age: timedelta = timedelta(days=1),
    **current: Any,
) -> RunFacts:
    values: dict[str, Any] = {
        "num_games": 60_000,
        "priority": 0.0,
        "throughput": 100.0,
        "auto_purge": False,
        "info": "Better eval",
    }
    values.update(current)
    return RunFacts(kind, "alice", NOW - age, approved, failed, Modifiable(**values))


def modify(
    facts: RunFacts, actor: str = "alice", approver: bool = False, **requested: Any
) -> Modification:
    return apply_modification(facts, requested, actor=actor, is_approver=approver, now=NOW)


def refused(facts: RunFacts, actor: str = "alice", approver: bool = False, **requested: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        modify(facts, actor, approver, **requested)
    return caught.value.field


def test_nothing_requested_changes_nothing() -> None:
    result = modify(run())
    assert result.values == run().current
    assert result.changes == {}
    assert result.approval_lost is False


def test_changes_are_reported_old_and_new() -> None:
    result = modify(run(), num_games="100000", auto_purge=True)
    assert result.values.num_games == 100_000
    assert result.changes == {"num_games": (60_000, 100_000), "auto_purge": (False, True)}


# ------------------------------------------------------------ 30 days


def test_within_30_days() -> None:
    assert modify(run(age=timedelta(days=30)), num_games=2000).values.num_games == 2000


def test_after_30_days() -> None:
    assert refused(run(age=timedelta(days=30, seconds=1)), num_games=2000) == "run"


def test_finished_runs_may_be_modified() -> None:
    # Re-opening a stopped run is how it is resumed; the window is the only limit.
    assert modify(run(age=timedelta(days=29)), num_games=80_000).values.num_games == 80_000


# ------------------------------------------------------------ num_games


@pytest.mark.parametrize("games", [1000, 3_200_000, 59_000])
def test_sprt_num_games_may_change(games: int) -> None:
    assert modify(run("sprt"), num_games=games).values.num_games == games


@pytest.mark.parametrize("games", [1500, 0, 3_201_000, -1000, "many"])
def test_bad_num_games(games: Any) -> None:
    assert refused(run("sprt"), num_games=games) == "num_games"


def test_unchanged_odd_thousand_is_not_rechecked() -> None:
    facts = run("fixed", num_games=60_002)
    assert modify(facts, num_games=60_002, priority=-1).values.num_games == 60_002


def test_fixed_games_cannot_increase() -> None:
    assert refused(run("fixed"), num_games=61_000) == "num_games"
    assert modify(run("fixed"), num_games=40_000).values.num_games == 40_000


def test_spsa_games_cannot_change() -> None:
    assert refused(run("spsa"), num_games=59_000) == "num_games"
    assert refused(run("spsa"), num_games=61_000) == "num_games"
    assert modify(run("spsa"), num_games=60_000).changes == {}


# ------------------------------------------------------------ throughput and priority


@pytest.mark.parametrize(("throughput", "ok"), [(0, True), (500, True), (-1, False), (501, False)])
def test_throughput_range(throughput: float, ok: bool) -> None:
    if ok:
        assert modify(run(), approver=True, throughput=throughput).values.throughput == throughput
    else:
        assert refused(run(), throughput=throughput) == "throughput"


def test_priority_must_be_a_number() -> None:
    assert refused(run(), priority="high") == "priority"
    assert refused(run(), priority=float("nan")) == "priority"


@pytest.mark.parametrize(
    ("current", "requested", "lost"),
    [
        ({}, {"throughput": 100}, False),
        ({}, {"throughput": 50}, False),
        ({}, {"throughput": 101}, True),
        ({"throughput": 200.0}, {"throughput": 200}, False),
        ({"throughput": 200.0}, {"throughput": 150}, False),
        ({"throughput": 200.0}, {"throughput": 201}, True),
        ({"throughput": 50.0}, {"throughput": 100}, False),
        ({}, {"priority": 0}, False),
        ({}, {"priority": -5}, False),
        ({}, {"priority": 0.5}, True),
        ({"priority": 2.0}, {"priority": 2}, False),
        ({"priority": 2.0}, {"priority": 3}, True),
        ({"priority": -3.0}, {"priority": -1}, False),
    ],
)
def test_non_approver_raising_share_loses_approval(
    current: dict[str, Any], requested: dict[str, Any], lost: bool
) -> None:
    assert modify(run(**current), **requested).approval_lost is lost


def test_approver_keeps_approval() -> None:
    result = modify(run(), actor="bob", approver=True, throughput=500, priority=10)
    assert result.approval_lost is False
    assert (result.values.throughput, result.values.priority) == (500, 10)


def test_failed_run_touched_by_non_approver_loses_approval() -> None:
    assert modify(run(failed=True), num_games=70_000).approval_lost is True
    assert modify(run(failed=True), approver=True, num_games=70_000).approval_lost is False


def test_unapproved_run_has_no_approval_to_lose() -> None:
    assert modify(run(approved=False), throughput=300).approval_lost is False


# ------------------------------------------------------------ info


def test_owner_changes_info() -> None:
    result = modify(run(), info="  Better eval, take 2\n")
    assert result.values.info == "Better eval, take 2"
    assert result.changes == {"info": ("Better eval", "Better eval, take 2")}


def test_only_owner_changes_info() -> None:
    assert refused(run(), actor="bob", approver=True, info="Hijacked") == "info"


def test_approver_may_resubmit_the_same_info() -> None:
    result = modify(run(), actor="bob", approver=True, info="Better eval", num_games=1000)
    assert result.values.info == "Better eval"
    assert result.changes == {"num_games": (60_000, 1000)}


def test_info_limits() -> None:
    assert refused(run(), info="x" * 10_001) == "info"
    assert refused(run(), info="bad\x00") == "info"


def test_auto_purge() -> None:
    assert modify(run(), auto_purge="on").values.auto_purge is True
    assert refused(run(), auto_purge="perhaps") == "auto_purge"
