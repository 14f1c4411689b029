"""Machine health: evidence of one run against a machine, and quarantine only on
evidence across runs of several authors."""

import pytest

from arbiter.domain.health import (
    Finding,
    HealthRules,
    MachineRun,
    binomial_tail,
    machine_records,
    poisson_tail,
    run_findings,
    verdicts,
)
from arbiter.stats.purge import residual_thresholds

RULES = HealthRules()


def machine(
    name: str,
    *,
    games: int = 500,
    crashes: int = 0,
    time_losses: int = 0,
    score: float = 0.5,
    run: str = "r1",
    author: str = "alice",
    tasks: int = 4,
    silent: int = 0,
    nps: float = 0.0,
    game_nps: float = 0.0,
) -> MachineRun:
    pairs = games // 2
    wins, losses = pairs * score * 0.4, pairs * (1 - score) * 0.4
    rows = (wins, losses, pairs * 0.6)
    return MachineRun(
        name, run, author, games, crashes, time_losses, rows, tasks, silent, nps, game_nps
    )


def fleet(*special: MachineRun, size: int = 20) -> list[MachineRun]:
    names = {m.worker_name for m in special}
    honest = [machine(f"m{i}") for i in range(size) if f"m{i}" not in names]
    return [*honest, *special]


def kinds(found: list[tuple[str, Finding]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, finding in found:
        out.setdefault(name, set()).add(finding.kind)
    return out


def test_a_machine_that_crashes_where_the_others_do_not_is_evidence() -> None:
    found = run_findings(fleet(machine("bad", crashes=12)), RULES)
    assert kinds(found) == {"bad": {"crashes"}}
    assert "12 crashes and 0 time losses in 500 games" in found[0][1].detail


def test_a_run_where_every_machine_crashes_is_no_evidence() -> None:
    """A bad patch: the others are not clean, so the run proves nothing."""
    everyone = [machine(f"m{i}", crashes=25) for i in range(20)]
    assert run_findings([*everyone, machine("worst", crashes=60)], RULES) == []


def test_a_few_crashes_are_no_evidence() -> None:
    assert run_findings(fleet(machine("unlucky", crashes=2)), RULES) == []


def test_a_machine_reporting_other_results_is_evidence() -> None:
    found = run_findings(fleet(machine("biased", score=0.9)), RULES)
    assert kinds(found) == {"biased": {"residual"}}


def test_a_machine_that_leaves_its_tasks_is_evidence_unless_all_do() -> None:
    assert kinds(run_findings(fleet(machine("gone", silent=3)), RULES)) == {"gone": {"silent"}}
    assert run_findings(fleet(machine("flaky", silent=1)), RULES) == []
    outage = [machine(f"m{i}", silent=3) for i in range(20)]
    assert run_findings(outage, RULES) == []


def finding(run: str, author: str, kind: str = "crashes") -> tuple[str, Finding]:
    return "bad", Finding(run, author, kind, "")


def test_a_machine_searching_far_off_the_speed_it_reports_is_evidence() -> None:
    """Honest machines search in their games at about 0.8 of their bench
    figure, at speeds from 0.6 to 1.4 Mnps; one that reports 3 Mnps (and so
    plays a time control a third as long) searches at 0.7."""
    honest = [
        machine(f"m{i}", nps=(0.6 + 0.04 * i) * 1e6, game_nps=0.8 * (0.6 + 0.04 * i) * 1e6)
        for i in range(20)
    ]
    liar = machine("m7", nps=3e6, game_nps=0.7e6)
    ((name, finding),) = run_findings([*honest[:7], liar, *honest[8:]], RULES)
    assert (name, finding.kind) == ("m7", "speed")
    assert finding.detail == (
        "searched at 0.70 Mnps in its games, reports 3.00 Mnps: 0.23 of it; the run's machines 0.80"
    )
    assert run_findings(honest, RULES) == []
    # The official worker measures nothing in its games: no evidence either way.
    unmeasured = [machine(f"m{i}", nps=1e6) for i in range(20)]
    assert run_findings(unmeasured, RULES) == []
    assert run_findings([*honest[:3], liar], RULES) == []  # too few measured


def test_quarantine_needs_three_runs_of_two_authors() -> None:
    assert verdicts([finding("r1", "a"), finding("r2", "a"), finding("r3", "a")], RULES) == {}
    assert verdicts([finding("r1", "a"), finding("r2", "b")], RULES) == {}
    convicted = verdicts([finding("r1", "a"), finding("r2", "a"), finding("r3", "b")], RULES)
    assert [f.run_id for f in convicted["bad"]] == ["r1", "r2", "r3"]


def test_kinds_of_evidence_are_not_added_together() -> None:
    mixed = [finding("r1", "a"), finding("r2", "b", "residual"), finding("r3", "a", "silent")]
    assert verdicts(mixed, RULES) == {}


def test_the_tails() -> None:
    assert poisson_tail(0, 3.0) == 1.0
    assert poisson_tail(1, 2.0) == pytest.approx(1 - 2.718281828459045**-2.0)
    assert poisson_tail(3, 0.0) == 0.0
    assert binomial_tail(2, 4, 0.5) == pytest.approx(11 / 16)
    assert binomial_tail(0, 4, 0.1) == pytest.approx(1.0)


def test_a_machines_record_sums_its_runs_and_names_the_evidence() -> None:
    runs = {
        "r1": [machine("m1", crashes=3, silent=1, nps=1e6, game_nps=8e5), machine("m2")],
        "r2": [machine("m1", run="r2", author="bob", time_losses=2, nps=2e6)],
    }
    finding = Finding("r2", "bob", "crashes", "x")
    records = machine_records(runs, [("m1", finding), ("m1", finding)], RULES)
    assert records["m1"] == {
        "runs": 2,
        "authors": 2,
        "tasks": 8,
        "games": 1000,
        "crashes": 3,
        "time_losses": 2,
        "failed": 0,
        "silent": 1,
        "nps": 1.5e6,
        "game_nps": 8e5,
        "evidence": {"crashes": ["r2"]},
    }
    assert records["m2"]["evidence"] == {}
    assert records["m2"]["nps"] == 0.0  # not known


def test_a_record_keeps_the_machines_worst_residual_against_its_runs_threshold() -> None:
    runs = {
        "r1": fleet(machine("m3", score=0.8)),
        "r2": [machine(f"m{i}", run="r2") for i in range(20)],
    }
    records = machine_records(runs, [], RULES)
    z99 = residual_thresholds(20)[1]
    assert records["m3"]["residual_threshold"] == round(z99, 2)
    assert records["m3"]["residual"] > z99  # r1, where it reported other results
    assert records["m4"]["residual"] < z99
    few = machine_records({"r3": [machine("m1", run="r3"), machine("m2", run="r3")]}, [], RULES)
    assert "residual" not in few["m1"]  # too few machines to say
