"""Machine health: which machines spoil results, on evidence across runs.

A crash or a lost game on time proves little alone: a bad patch makes every
machine of its run crash, and a slow machine loses on time at long time
controls. So a machine's results on a run are compared with the other
machines of the same run, and a run counts as evidence against it only when
the others were clean there:
- crashes and time losses: the others lost at most `clean_rate` of their
  games so, and this machine lost significantly more (a Poisson tail below
  `crash_p` at the others' rate, floored at `clean_floor`), and at least
  `min_events` of them;
- biased results: its residual against the other machines of the run (the
  χ² contribution the run page shows) beyond the run's 99% Bonferroni
  threshold, on a run of at least `min_machines` machines;
- a false speed: the nps it searched at in its games over the nps it
  reports (which scales its time control), off the median of that ratio on
  the run by more than `speed_factor` either way, on a run where at least
  `min_machines` machines measured it (Arbiter's worker does; the official
  worker does not, so its machines give no such evidence);
- vanishing: at least `min_silent` of its tasks on the run were taken back
  after it went silent, significantly more than the others' share (a
  binomial tail below `silent_p`, the share floored at `silent_floor`),
  while at most `clean_silent_share` of the other machines left any (a
  restart of the server is not the machines' doing).
A machine is quarantined when one kind of evidence comes from at least
`min_runs` runs of at least `min_authors` authors: a patch of one author,
however bad, quarantines nobody. The defaults and their false-positive rate
are measured by bench/health.py (docs/benchmarks.md).

Pure: the records come from storage (`TaskStore.machine_run_totals`), the
verdicts go to `domain.quarantine`.
"""

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arbiter.stats._math import chi2_sf
from arbiter.stats.purge import chi2_residuals, residual_thresholds


@dataclass(frozen=True, slots=True)
class MachineRun:
    """A machine's results on one run (its good tasks summed)."""

    worker_name: str
    run_id: str
    author: str  # who submitted the run
    games: int
    crashes: int
    time_losses: int
    rows: tuple[float, float, float]  # game pairs as the χ² reads them: wins, losses, draws
    tasks: int = 0
    silent: int = 0  # tasks taken back because the machine went silent
    nps: float = 0.0  # what it reports (its bench), per thread
    game_nps: float = 0.0  # what it searched at in its games; 0: not measured
    failed: int = 0  # tasks it gave up (failed_task): recorded, not evidence

    @property
    def speed(self) -> float | None:
        """Measured over reported nps, when both are known."""
        return self.game_nps / self.nps if self.game_nps > 0 and self.nps > 0 else None

    @property
    def failures(self) -> int:
        return self.crashes + self.time_losses


RESIDUAL_SHOWN = 99.0  # a residual "beyond all doubt" (infinite) is kept as this in a record


@dataclass(frozen=True, slots=True)
class HealthRules:
    min_runs: int = 3
    min_authors: int = 2
    clean_rate: float = 0.01  # the others' crashes and time losses per game, at most
    clean_floor: float = 0.002  # the rate a machine is held to, at least
    crash_p: float = 1e-4
    min_events: int = 3
    min_machines: int = 5  # on fewer, a residual says little
    min_silent: int = 2  # tasks a machine left silent on one run
    clean_silent_share: float = 0.25  # of the other machines that left one, at most
    silent_floor: float = 0.02  # the share of tasks a machine is held to, at least
    silent_p: float = 1e-3
    speed_factor: float = 2.0  # measured/reported off the others' median by this, at least


@dataclass(frozen=True, slots=True)
class Finding:
    run_id: str
    author: str
    kind: str  # "crashes", "residual", "silent" or "speed"
    detail: str


def run_findings(machines: Sequence[MachineRun], rules: HealthRules) -> list[tuple[str, Finding]]:
    """(machine, finding) for each machine one run gives evidence against."""
    found = [
        *_failure_findings(machines, rules),
        *_residual_findings(machines, rules),
        *_silent_findings(machines, rules),
        *_speed_findings(machines, rules),
    ]
    return sorted(found, key=lambda pair: (pair[0], pair[1].kind))


def _failure_findings(
    machines: Sequence[MachineRun], rules: HealthRules
) -> Iterable[tuple[str, Finding]]:
    games = sum(m.games for m in machines)
    failures = sum(m.failures for m in machines)
    for machine in machines:
        if machine.failures < rules.min_events or machine.games == 0:
            continue
        other_games = games - machine.games
        if other_games <= 0:
            continue
        others_rate = (failures - machine.failures) / other_games
        if others_rate > rules.clean_rate:
            continue  # the run itself fails: a bad patch, not a bad machine
        expected = machine.games * max(others_rate, rules.clean_floor)
        tail = poisson_tail(machine.failures, expected)
        if tail < rules.crash_p:
            detail = (
                f"{machine.crashes} crashes and {machine.time_losses} time losses in "
                f"{machine.games} games; the other machines {100 * others_rate:.2f}% of theirs"
            )
            yield machine.worker_name, Finding(machine.run_id, machine.author, "crashes", detail)


def _residual_findings(
    machines: Sequence[MachineRun], rules: HealthRules
) -> Iterable[tuple[str, Finding]]:
    residuals = run_residuals(machines, rules)
    if residuals is None:
        return
    by_machine, z99 = residuals
    for machine in machines:
        z = by_machine.get(machine.worker_name)
        if z is not None and z > z99:
            shown = "beyond all doubt" if math.isinf(z) else f"{z:.2f}"
            detail = f"residual {shown} against the run's 99% threshold {z99:.2f}"
            yield machine.worker_name, Finding(machine.run_id, machine.author, "residual", detail)


def run_residuals(
    machines: Sequence[MachineRun], rules: HealthRules
) -> tuple[Mapping[str, float], float] | None:
    """Each machine's χ² residual on the run, and the run's 99% threshold
    (None on a run of too few machines to say)."""
    if len(machines) < rules.min_machines:
        return None
    result = chi2_residuals({m.worker_name: m.rows for m in machines})
    _, z99 = residual_thresholds(len(result.residual))
    return result.residual, z99


def _silent_findings(
    machines: Sequence[MachineRun], rules: HealthRules
) -> Iterable[tuple[str, Finding]]:
    silent_machines = sum(1 for m in machines if m.silent)
    silent_tasks, tasks = sum(m.silent for m in machines), sum(m.tasks for m in machines)
    for machine in machines:
        if machine.silent < rules.min_silent or len(machines) < 2:
            continue
        others = (silent_machines - 1) / (len(machines) - 1)
        if others > rules.clean_silent_share:
            continue  # many went silent at once: the server or the network, not the machine
        other_tasks = tasks - machine.tasks
        rate = (silent_tasks - machine.silent) / other_tasks if other_tasks else 0.0
        if binomial_tail(machine.silent, machine.tasks, max(rate, rules.silent_floor)) >= (
            rules.silent_p
        ):
            continue
        detail = (
            f"{machine.silent} of its {machine.tasks} tasks went silent; "
            f"{100 * others:.1f}% of the other machines left any"
        )
        yield machine.worker_name, Finding(machine.run_id, machine.author, "silent", detail)


def _speed_findings(
    machines: Sequence[MachineRun], rules: HealthRules
) -> Iterable[tuple[str, Finding]]:
    speeds = {m.worker_name: m.speed for m in machines if m.speed is not None}
    if len(speeds) < rules.min_machines:
        return
    # The median of all: on at least min_machines, one machine barely moves it.
    typical = statistics.median(speeds.values())
    for machine in machines:
        speed = speeds.get(machine.worker_name)
        if speed is None or typical / rules.speed_factor <= speed <= typical * rules.speed_factor:
            continue
        detail = (
            f"searched at {machine.game_nps / 1e6:.2f} Mnps in its games, reports "
            f"{machine.nps / 1e6:.2f} Mnps: {speed:.2f} of it; the run's machines {typical:.2f}"
        )
        yield machine.worker_name, Finding(machine.run_id, machine.author, "speed", detail)


def binomial_tail(events: int, trials: int, p: float) -> float:
    """P(X ≥ events) for X ~ Binomial(trials, p) (trials are a run's tasks: few)."""
    return sum(
        math.comb(trials, k) * p**k * (1.0 - p) ** (trials - k)
        for k in range(max(events, 0), trials + 1)
    )


def poisson_tail(events: int, expected: float) -> float:
    """P(X ≥ events) for X ~ Poisson(expected): the regularized lower Γ(events, expected)."""
    if events <= 0:
        return 1.0
    if expected <= 0.0:
        return 0.0
    return 1.0 - chi2_sf(2.0 * expected, 2.0 * events)


def verdicts(
    findings: Iterable[tuple[str, Finding]], rules: HealthRules
) -> dict[str, list[Finding]]:
    """The machines to quarantine, each with the findings of the kind that
    convicts it (runs of enough authors)."""
    by_kind: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for machine, finding in findings:
        by_kind[machine, finding.kind].append(finding)
    convicted: dict[str, list[Finding]] = {}
    for (machine, _), evidence in sorted(by_kind.items()):
        runs = {finding.run_id for finding in evidence}
        authors = {finding.author for finding in evidence}
        if len(runs) >= rules.min_runs and len(authors) >= rules.min_authors:
            convicted.setdefault(machine, []).extend(evidence)
    return convicted


def machine_findings(
    runs: Mapping[str, Sequence[MachineRun]], rules: HealthRules
) -> list[tuple[str, Finding]]:
    """Every run's findings (runs by id, each with its machines' records)."""
    return [pair for machines in runs.values() for pair in run_findings(machines, rules)]


def machine_records(
    runs: Mapping[str, Sequence[MachineRun]],
    findings: Iterable[tuple[str, Finding]],
    rules: HealthRules,
) -> dict[str, dict[str, Any]]:
    """Each machine's record over the runs: counts, mean speeds, its worst χ²
    residual against its run's 99% threshold, and the runs of each kind of
    evidence against it (what its page and its owner's show)."""
    evidence: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, finding in findings:
        evidence[name][finding.kind].append(finding.run_id)
    by_machine: dict[str, list[MachineRun]] = defaultdict(list)
    worst: dict[str, tuple[float, float]] = {}  # (residual over threshold, threshold)
    for machines in runs.values():
        residuals = run_residuals(machines, rules)
        for machine in machines:
            by_machine[machine.worker_name].append(machine)
            z = residuals[0].get(machine.worker_name) if residuals else None
            if residuals is not None and z is not None:
                margin = min(z, RESIDUAL_SHOWN) - residuals[1]
                if machine.worker_name not in worst or margin > worst[machine.worker_name][0]:
                    worst[machine.worker_name] = (margin, residuals[1])
    return {
        name: _record(machines, evidence.get(name, {}), worst.get(name))
        for name, machines in sorted(by_machine.items())
    }


def _record(
    machines: Sequence[MachineRun],
    evidence: Mapping[str, list[str]],
    worst: tuple[float, float] | None,
) -> dict[str, Any]:
    counted = ("tasks", "games", "crashes", "time_losses", "failed", "silent")
    record: dict[str, Any] = {
        "runs": len(machines),
        "authors": len({m.author for m in machines}),
        **{name: sum(getattr(m, name) for m in machines) for name in counted},
        "nps": _mean([m.nps for m in machines]),
        "game_nps": _mean([m.game_nps for m in machines]),
        "evidence": {kind: sorted(set(run_ids)) for kind, run_ids in sorted(evidence.items())},
    }
    if worst is not None:  # its worst run's residual, and that run's 99% threshold
        margin, threshold = worst
        record["residual"] = round(margin + threshold, 2)
        record["residual_threshold"] = round(threshold, 2)
    return record


def _mean(values: Sequence[float]) -> float:
    """The mean of the known (non-zero) values; 0 when none is."""
    known = [value for value in values if value > 0]
    return sum(known) / len(known) if known else 0.0
