"""CPU per result update in the results thread's batches, without a server.

The fleet (bench/fleet.py) gives the results thread's share of the server's
CPU; this takes that thread's work apart from the rest: one batch of
update_task calls served as the thread serves what it finds waiting (each
update folded into its run under the run's lock, every run's change committed
in one transaction, then the WAL synced), on a real SQLite file, in a process
of its own. Each update adds one SPRT batch of pairs to its task; the SPRT
bounds are wide (alpha = beta = 1e-6), so no run decides meanwhile.

Two batch shapes, each `--batch` updates (the results thread takes 256 at
most): all of one run, as when one large test holds most of the fleet; and
spread over `--runs` runs, as in bench/fleet.py. Each round measures every
shape and revision in turn, a fresh process each, so the host's load falls on
all of them alike; the figure is the median over the rounds of the process's
CPU time per update.

  .venv/bin/python bench/fold_cost.py [--against REV] [--rounds 6] [--batch 256] [--runs 10]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import arbiter
from arbiter.domain.runs.ingest import ResultUpdate
from arbiter.domain.runs.service import Runs
from arbiter.domain.runs.update_batches import _UpdateCall
from arbiter.protocol.messages import WorkerInfo
from arbiter.runtime.bootstrap import open_storage
from arbiter.runtime.settings import Settings
from arbiter.storage import Storage
from bench.lib import harness
from bench.lib.command import command_line
from tests.domain.runs.support import approved_run, make_user, pairs, take_task, worker

SPRT = {"elo0": 0, "elo1": 2, "alpha": 1e-6, "beta": 1e-6}
GROUPS = 4  # batches of different tasks served at each step (a task holds few steps)


@dataclass
class Measured(harness.Rounds):
    runs_in_batch: float = 0.0  # the median number of runs a batch's updates were of


@dataclass
class Held:
    """What the child holds: its runs service, and each task (worker, run, id)."""

    runs: Runs
    tasks: list[tuple[WorkerInfo, str, int]]
    pairs_per_task: int
    sprt_batch: int  # pairs an update adds


def hold_tasks(storage: Storage, repo: str, tasks: int, runs_wanted: int) -> Held:
    """`runs_wanted` approved SPRT runs and `tasks` workers holding a task of them."""
    runs = Runs(storage, task_gate=threading.Semaphore(tasks))
    owner, approver = make_user(storage, "owner"), make_user(storage, "root", approver=True)
    for _ in range(runs_wanted):
        approved_run(runs, owner, approver, repo, sprt=SPRT)
    held, pairs_per_task, sprt_batch = [], 0, 0
    for index in range(tasks):
        info = worker("owner", key=f"w{index:04d}")
        reply = take_task(runs, owner, info, addr=f"10.{index // 250}.0.{index % 250}")
        held.append((info, reply["run"]["_id"], reply["task_id"]))
        pairs_per_task = reply["run"]["my_task"]["num_games"] // 2
        # From the wire, which every revision this compares with shares.
        sprt_batch = int(reply["run"]["args"]["sprt"]["batch_size"])
    return Held(runs, held, pairs_per_task, sprt_batch)


def serve(held: Held, group: list[tuple[WorkerInfo, str, int]], step: int) -> None:
    """One batch: each task of `group` reports `step` SPRT batches of pairs, served
    as the results thread serves what it finds waiting, then made durable."""
    quarter = step * held.sprt_batch // 4  # the pentanomial [0, q, 2q, q, 0]
    stats = pairs(ld=quarter, dd=2 * quarter, wd=quarter)
    calls = [_UpdateCall(update=ResultUpdate(info, run, task, stats)) for info, run, task in group]
    finish = held.runs.updates._serve(calls)
    if finish is not None:
        finish()
    assert all(call.reply.get("task_alive") is True for call in calls), calls[0].reply


def child(batch: int, runs_wanted: int, scratch: Path) -> dict[str, object]:
    """Serve batches of `batch` updates over `runs_wanted` runs in this process;
    CPU us per update over the measured batches, and where `arbiter` came from."""
    repo = harness.make_repo(scratch / "repo")
    with open_storage(Settings(data_dir=scratch, database_url="")) as storage:
        held = hold_tasks(storage, repo, GROUPS * batch, runs_wanted)
        groups = [held.tasks[start : start + batch] for start in range(0, len(held.tasks), batch)]
        steps = held.pairs_per_task // held.sprt_batch - 1  # tasks stay active: no run changes
        try:
            with storage.connection_held():  # as the results thread holds one
                for group in groups:  # warm-up: caches, the first statements prepared
                    serve(held, group, 1)
                before = time.process_time()
                for step in range(2, steps + 1):
                    for group in groups:
                        serve(held, group, step)
                spent = time.process_time() - before
        finally:
            held.runs.close()
    return {
        "us_per_update": spent / ((steps - 1) * len(held.tasks)) * 1e6,
        "runs_in_batch": statistics.median(len({run for _, run, _ in g}) for g in groups),
        "source": str(Path(arbiter.__file__).parent.parent),
    }


def measure_once(source: Path | None, batch: int, runs: int) -> dict[str, Any]:
    """One child process on the package under `source` (None: this checkout)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    with harness.scratch_dir("fold-cost-") as scratch:
        command = [sys.executable, __file__, "--child", str(scratch), "--batch", str(batch)]
        done = subprocess.run(
            [*command, "--runs", str(runs)], env=env, capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"fold_cost child failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    expected = source or harness.ROOT / "src"
    if Path(result["source"]).resolve() != expected.resolve():
        raise RuntimeError(f"the child imported arbiter from {result['source']}, not {expected}")
    return result


def measure(options: argparse.Namespace, against: Path | None) -> list[tuple[str, Measured]]:
    trees: list[tuple[str, Path | None]] = [("this checkout", None)]
    if against is not None:
        trees.append((options.against, against))
    shapes = [("one run", 1), (f"{options.runs} runs", options.runs)]
    table = [
        (shape, runs, Measured(tree), source) for shape, runs in shapes for tree, source in trees
    ]
    for _ in range(options.rounds):
        for _, runs, measured, source in table:
            result = measure_once(source, options.batch, runs)
            measured.values.append(float(result["us_per_update"]))
            measured.runs_in_batch = float(result["runs_in_batch"])
    return [(shape, measured) for shape, _, measured, _ in table]


def report(measured: list[tuple[str, Measured]], options: argparse.Namespace) -> list[str]:
    lines = [
        f"CPU per result update in batches of {options.batch} updates, served as the"
        f" results thread serves them (fold, commit, WAL sync), on SQLite;"
        f" {options.rounds} rounds, each a fresh process per shape and revision, in turn.",
        "",
        "| batch | runs in a batch | code | us per update (median) | each round |",
        "|---|---:|---|---:|---|",
    ]
    for shape, entry in measured:
        lines.append(
            f"| {shape} | {entry.runs_in_batch:g} | {entry.name} | {entry.median:.1f}"
            f" | {entry.listed()} |"
        )
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a git revision to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batch", type=int, default=256, help="updates in a batch")
    parser.add_argument("--runs", type=int, default=10, help="runs of the spread batch")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # its scratch directory
    options = parser.parse_args(argv)
    if options.batch < 1 or options.runs < 1:
        parser.error("--batch and --runs must be at least 1")
    return options


def run(options: argparse.Namespace) -> list[str]:
    if options.against is None:
        return report(measure(options, None), options)
    with harness.source_tree(options.against, "fold-cost-") as against:
        return report(measure(options, against), options)


def main() -> None:
    options = parse(sys.argv[1:])
    if options.child is not None:
        print(json.dumps(child(options.batch, options.runs, options.child)))
        return
    lines = run(options)
    print("\n".join([*lines, "", f"- Machine: {harness.machine(pinned=False)}.", ""]))
    print(f"Command: `{command_line()}`")


if __name__ == "__main__":
    main()
