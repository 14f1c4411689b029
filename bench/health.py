"""Machine health on a simulated fleet: who the quarantine rule convicts.

A fleet of `--machines` machines plays `--runs` runs of `--authors` authors,
one after another; each run is played by `--per-run` machines drawn at
random, each with `--tasks` tasks of `--games` games. The honest machines
crash, lose on time and go silent rarely; 1% of the fleet is bad, of four kinds:
- time-losers lose 3% of their games on time,
- crashers crash in 2% of theirs,
- biased machines report results as if the test were `--bias` Elo stronger,
- vanishers go silent on 60% of their tasks.
One run is a bad patch: every machine crashes in 5% of its games there.

The rule (domain/health.py, default thresholds) is applied after each run to
everything seen so far, as the server's job does. Reported: the share of the
bad machines quarantined and the games each had played by then; honest
machines quarantined with the bad fleet, and in `--repetitions` fleets with
no bad machine at all (the bad patch still in each); and how many runs' SPRT
(normalized ⟨0, 2⟩ over each run's games) ends otherwise with the bad
machines' results than without them.

  .venv/bin/python bench/health.py [--repetitions 10] [--write]
"""

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arbiter.domain.health import Finding, HealthRules, MachineRun, run_findings, verdicts
from arbiter.stats.elo import score_from_elo
from arbiter.stats.llr import llr_normalized, sprt_bounds
from bench.lib.command import command_line
from bench.lib.harness import machine, write_section

KINDS = ("time-loser", "crasher", "biased", "vanisher")
HONEST_CRASH, HONEST_TIME = 0.0002, 0.0005  # per game
HONEST_SILENT = 0.02  # per task: a reboot, a lost connection
DRAW_RATIO = 0.6


@dataclass
class Machine:
    name: str
    kind: str  # "honest" or one of KINDS
    games: int = 0
    convicted_after: int | None = None  # games played when first quarantined


@dataclass
class Outcome:
    bad_found: dict[str, int] = field(default_factory=dict)  # kind -> quarantined
    bad_total: dict[str, int] = field(default_factory=dict)
    games_to_conviction: list[int] = field(default_factory=list)
    honest_convicted: int = 0
    honest_findings: int = 0  # runs that gave evidence against an honest machine
    honest_machine_runs: int = 0
    sprt_changed: int = 0


def pair_probabilities(elo: float) -> list[float]:
    """Pentanomial (LL, LD, DD+WL, WD, WW) of two independent games at this Elo."""
    score = score_from_elo(elo)
    draw = min(DRAW_RATIO, 1.8 * min(score, 1 - score))  # fewer draws far from even
    win = score - draw / 2
    loss = 1 - draw - win
    return [
        loss * loss,
        2 * loss * draw,
        draw * draw + 2 * win * loss,
        2 * win * draw,
        win * win,
    ]


def simulate(args: argparse.Namespace, seed: int, *, with_bad: bool) -> Outcome:
    rng = np.random.default_rng(seed)
    machines = [Machine(f"m{i}-8cores-{i:08x}", "honest") for i in range(args.machines)]
    if with_bad:
        bad = rng.choice(args.machines, size=max(4, args.machines // 100), replace=False)
        for index, chosen in enumerate(bad):
            machines[chosen].kind = KINDS[index % len(KINDS)]
    rules, seen, outcome = HealthRules(), [], Outcome()
    bad_patch = int(rng.integers(args.runs))
    for run in range(args.runs):
        run_id, author = f"run{run}", f"author{run % args.authors}"
        elo = float(rng.uniform(-2.0, 3.0))
        playing = rng.choice(args.machines, size=args.per_run, replace=False)
        records, honest_penta, all_penta = [], np.zeros(5), np.zeros(5)
        for index in playing:
            played = (run_id, author, elo)
            record, penta = play(rng, machines[index], played, args, bad_patch=run == bad_patch)
            records.append(record)
            all_penta += penta
            if machines[index].kind == "honest":
                honest_penta += penta
        found = run_findings(records, rules)
        kinds = {one.name: one.kind for one in machines}
        outcome.honest_findings += sum(1 for name, _ in found if kinds[name] == "honest")
        outcome.honest_machine_runs += sum(1 for r in records if kinds[r.worker_name] == "honest")
        seen.extend(found)
        convict(machines, verdicts(seen, rules))
        if with_bad and sprt_state(all_penta) != sprt_state(honest_penta):
            outcome.sprt_changed += 1
    for one in machines:
        if one.kind == "honest":
            outcome.honest_convicted += one.convicted_after is not None
            continue
        outcome.bad_total[one.kind] = outcome.bad_total.get(one.kind, 0) + 1
        if one.convicted_after is not None:
            outcome.bad_found[one.kind] = outcome.bad_found.get(one.kind, 0) + 1
            outcome.games_to_conviction.append(one.convicted_after)
    return outcome


def play(
    rng: np.random.Generator,
    one: Machine,
    run: tuple[str, str, float],
    args: argparse.Namespace,
    *,
    bad_patch: bool,
) -> tuple[MachineRun, np.ndarray]:
    """One machine's tasks on a run (id, author, true Elo): its record, and the
    pairs it reported."""
    run_id, author, elo = run
    reported_elo = elo + (args.bias if one.kind == "biased" else 0.0)
    tasks, silent, games = args.tasks, 0, 0
    penta = np.zeros(5)
    for _ in range(tasks):
        if rng.random() < (0.6 if one.kind == "vanisher" else HONEST_SILENT):
            silent += 1
            continue
        penta += rng.multinomial(args.games // 2, pair_probabilities(reported_elo))
        games += args.games
    crash_rate = 0.05 if bad_patch else (0.02 if one.kind == "crasher" else HONEST_CRASH)
    time_rate = 0.03 if one.kind == "time-loser" else HONEST_TIME
    crashes, time_losses = int(rng.binomial(games, crash_rate)), int(rng.binomial(games, time_rate))
    one.games += games
    ll, ld, dd, wd, ww = (float(x) for x in penta)
    record = MachineRun(
        one.name, run_id, author, games, crashes, time_losses, (ww + wd, ll + ld, dd), tasks, silent
    )
    return record, penta


def convict(machines: list[Machine], convicted: dict[str, list[Finding]]) -> None:
    for one in machines:
        if one.name in convicted and one.convicted_after is None:
            one.convicted_after = one.games


def sprt_state(penta: np.ndarray) -> str:
    lower, upper = sprt_bounds(0.05, 0.05)
    llr = llr_normalized(0.0, 2.0, [float(x) for x in penta])
    return "accepted" if llr >= upper else "rejected" if llr <= lower else "undecided"


def report(args: argparse.Namespace) -> list[str]:
    bad = [simulate(args, seed, with_bad=True) for seed in range(args.repetitions)]
    honest = [simulate(args, 1000 + seed, with_bad=False) for seed in range(args.repetitions)]
    found, total = defaultdict(int), defaultdict(int)
    for outcome in bad:
        for kind in KINDS:
            found[kind] += outcome.bad_found.get(kind, 0)
            total[kind] += outcome.bad_total.get(kind, 0)
    all_found, all_total = sum(found.values()), sum(total.values())
    games = [g for outcome in bad for g in outcome.games_to_conviction]
    return [
        "| bad machines | quarantined |",
        "|---|---:|",
        *(f"| {kind} | {found[kind]} of {total[kind]} |" for kind in KINDS),
        f"| all | {all_found} of {all_total} ({100 * all_found / max(all_total, 1):.1f}%) |",
        "",
        f"- Games a bad machine had played when quarantined: median {statistics.median(games):,.0f}"
        f", at most {max(games):,}."
        if games
        else "- No bad machine was quarantined.",
        f"- Honest machines quarantined: {sum(o.honest_convicted for o in bad)} beside the bad"
        f" ones, {sum(o.honest_convicted for o in honest)} in {args.repetitions} fleets with no"
        " bad machine (each with its bad-patch run).",
        "- Evidence against honest machines (the false-positive rate of one run's"
        f" finding): {_rate(honest)} in the fleets without bad machines, the bad-patch run"
        " included; a quarantine needs three such runs of two authors.",
        f"- Runs whose SPRT ends otherwise with the bad machines' results:"
        f" {sum(o.sprt_changed for o in bad)} of {args.runs * args.repetitions}.",
        f"- Fleet: {args.machines} machines, {args.runs} runs of {args.authors} authors, "
        f"{args.per_run} machines a run with {args.tasks} tasks of {args.games} games (honest"
        f" ones crash in {100 * HONEST_CRASH:g}% of their games, lose {100 * HONEST_TIME:g}% on"
        f" time and go silent on {100 * HONEST_SILENT:g}% of their tasks); biased machines "
        f"report {args.bias:g} Elo; {args.repetitions} repetitions of each fleet.",
        f"- Machine: {machine(pinned=False)}.",
        "",
        f"Command: `{command_line()}`",
    ]


def _rate(outcomes: list[Outcome]) -> str:
    findings = sum(o.honest_findings for o in outcomes)
    machine_runs = sum(o.honest_machine_runs for o in outcomes)
    return f"{findings} in {machine_runs:,} machine-runs ({findings / max(machine_runs, 1):.1e})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--authors", type=int, default=8)
    parser.add_argument("--per-run", type=int, default=500)
    parser.add_argument("--tasks", type=int, default=4, help="tasks of a machine on a run")
    parser.add_argument("--games", type=int, default=128, help="games per task (even)")
    parser.add_argument("--bias", type=float, default=150.0, help="Elo a biased machine adds")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.games % 2 or args.per_run > args.machines:
        parser.error("--games must be even and --per-run at most --machines")
    lines = report(args)
    body = "\n".join(lines)
    print(body)
    if args.write:
        write_section("health", "Machine health on a simulated fleet", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
