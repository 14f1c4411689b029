"""Mutation testing of the modules whose guarantees the docs promise.

mutmut (pinned in the test extra) changes one thing at a time in a module (an
operator, a constant, a call dropped) and runs that module's own tests against
each change. A mutant the tests do not notice ("survived") is a one-line change
to the module that nobody would see: either a test is missing or the mutant is
equivalent (it changes nothing observable), which the report must say.

Run (CPU-heavy: every mutant is a test run; --jobs bounds the processes):
  .venv/bin/python bench/mutation.py durability admission [--jobs 1] [--write]
  .venv/bin/python bench/mutation.py --list

Each run works in a scratch copy of the repository (mutmut writes its mutants
beside the sources, in mutants/), so the working tree is never touched. The
report gives, per module: the tests run, mutants, killed, survived, timeouts and
others, the share killed, the wall time, and each survivor's diff
(`mutmut show`). --write puts it in docs/mutation-testing.md, section
`mutation-<module>`, with the survivors by name (their diffs are printed).
Exit status 1 when a module kills less than 90%.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lib import harness
from bench.lib.command import command_line

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.90  # the share of mutants the tests must kill
DOC = ROOT / "docs" / "mutation-testing.md"
COPIED = ("src", "tests", "bench", "scripts", "pyproject.toml")


@dataclass(frozen=True)
class Target:
    """A module with a documented guarantee, and the tests that state it."""

    source: str
    tests: tuple[str, ...]
    guarantee: str
    # Seconds a test may take before pytest-timeout fails it. For modules whose
    # mutants can leave a caller waiting forever: such a mutant then fails its
    # test at this limit (killed) instead of waiting for mutmut's timeout, which
    # is 15 times the selection's whole duration (over a minute for these).
    test_timeout: int | None = None


TARGETS = {
    "durability": Target(
        "src/arbiter/storage/durability.py",
        (
            "tests/storage/test_durability.py",
            "tests/web/test_crash_safety.py::test_update_task_is_answered_only_once_its_commit_is_synced",
        ),
        "nothing is acknowledged before its WAL is synced (group commit)",
    ),
    "middleware": Target(
        "src/arbiter/web/middleware.py",
        (
            "tests/web/test_middleware.py",
            "tests/web/test_secondary.py",
            "tests/web/test_worker_calls.py",
        ),
        "body limits (413), the secondary's refusals, shutdown guard, security headers "
        "(also as the worker calls' one guard layer uses them)",
    ),
    "settings": Target(
        "src/arbiter/runtime/settings.py",
        # Not test_server_process.py: it starts real server processes (about 40 s a
        # run), and what it states of settings (the defaults the server runs with)
        # test_settings.py states in-process.
        ("tests/runtime/test_settings.py", "tests/web/test_app.py"),
        "defaults and validation of every ARBITER_* setting",
    ),
    "accounts": Target(
        "src/arbiter/domain/accounts/*",
        ("tests/domain/accounts/test_accounts.py", "tests/domain/accounts/test_guard.py"),
        "passwords, sessions, tokens; unknown names cost what wrong passwords cost",
    ),
    "admission": Target(
        "src/arbiter/domain/runs/admission.py",
        ("tests/domain/runs/test_admission.py",),
        "the scheduler gate: its places, and at most a share per account",
    ),
    "ingest": Target(
        "src/arbiter/domain/runs/ingest.py",
        # test_spsa_steps.py states request_spsa and update_task's SPSA step.
        ("tests/domain/runs/test_ingest.py", "tests/domain/runs/test_spsa_steps.py"),
        "update_task, beat, failed_task: results counted once, refusals change nothing",
    ),
    "update_batches": Target(
        "src/arbiter/domain/runs/update_batches.py",
        (
            "tests/domain/runs/test_update_batches.py",
            "tests/web/test_crash_safety.py::test_update_task_is_answered_only_once_its_commit_is_synced",
        ),
        "update_task calls batched into one transaction per batch; each answered only once"
        " durable; a refused update answered alone; no lock awaited while others held",
        test_timeout=15,
    ),
    "call_batches": Target(
        "src/arbiter/domain/runs/call_batches.py",
        # The batch thread's two users: the scheduler (request_task) and the
        # results thread (update_task).
        (
            "tests/domain/runs/test_call_batches.py",
            "tests/domain/runs/test_scheduler.py",
            "tests/domain/runs/test_update_batches.py",
        ),
        "the batch thread: every call answered exactly once, an error to its caller,"
        " the thread ends when idle and comes back for a call",
        test_timeout=15,
    ),
}


@dataclass
class Outcome:
    module: str
    counts: dict[str, int]
    survivors: dict[str, str]  # mutant name -> its diff
    seconds: float

    @property
    def mutants(self) -> int:
        return sum(self.counts.values())

    @property
    def killed_share(self) -> float:
        """Killed among the mutants some test reached; a mutant that makes a test
        hang (timeout) was noticed, so it counts as killed."""
        tested = self.mutants - self.counts.get("no tests", 0) - self.counts.get("skipped", 0)
        caught = self.counts.get("killed", 0) + self.counts.get("timeout", 0)
        return caught / tested if tested else 0.0


def mutmut_config(target: Target, jobs: int) -> str:
    """The [tool.mutmut] table for one module: mutate only it, run only its tests."""
    selection = json.dumps(list(target.tests))
    limit = [] if target.test_timeout is None else ["--timeout", str(target.test_timeout)]
    pytest_args = json.dumps(["-p", "no:cacheprovider", "-n", "0", *limit])
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        'also_copy = ["bench", "scripts"]\n'
        f'only_mutate = ["{target.source}"]\n'
        f"pytest_add_cli_args_test_selection = {selection}\n"
        f"pytest_add_cli_args = {pytest_args}\n"
        f"max_children = {jobs}\n"
    )


def prepare_copy(scratch: Path, target: Target, jobs: int) -> Path:
    copy = scratch / "repo"
    copy.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "artifacts", "mutants")
            shutil.copytree(source, copy / name, ignore=ignore)
        else:
            shutil.copy2(source, copy / name)
    pyproject = copy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + mutmut_config(target, jobs))
    return copy


def mutmut(copy: Path, *args: str, timeout: float | None = None) -> str:
    # SQLite only: the mutants are the same on both backends, and time is the cost.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_")}
    env["PYTHONPATH"] = "src:."
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"mutmut {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


RESULT_LINE = re.compile(r"^\s*(?P<name>\S+__mutmut_\d+): (?P<status>.+?)\s*$")


def run_module(module: str, jobs: int) -> Outcome:
    target = TARGETS[module]
    with harness.scratch_dir(f"arbiter-mutation-{module}-") as scratch:
        copy = prepare_copy(scratch, target, jobs)
        started = time.monotonic()
        mutmut(copy, "run", "--max-children", str(jobs))
        seconds = time.monotonic() - started
        statuses: dict[str, str] = {}
        for line in mutmut(copy, "results", "--all", "true").splitlines():
            if match := RESULT_LINE.match(line):
                statuses[match["name"]] = match["status"]
        counts: dict[str, int] = {}
        for status in statuses.values():
            counts[status] = counts.get(status, 0) + 1
        survivors = {
            name: mutmut(copy, "show", name).strip()
            for name, status in sorted(statuses.items())
            if status == "survived"
        }
    return Outcome(module, counts, survivors, seconds)


def code(text: str) -> str:
    return f"`{text}`"


def report(outcome: Outcome, jobs: int, *, diffs: bool) -> str:
    """The module's section; `diffs` adds each survivor's diff (printed, not written)."""
    target = TARGETS[outcome.module]
    counts = ", ".join(f"{status} {n}" for status, n in sorted(outcome.counts.items()))
    lines = [
        f"- Module: `{target.source}` ({target.guarantee}).",
        f"- Tests run against each mutant (SQLite only): {', '.join(map(code, target.tests))}"
        + (
            "."
            if target.test_timeout is None
            else f"; a test still running after {target.test_timeout} s fails (pytest-timeout)."
        ),
        f"- Mutants: {outcome.mutants} ({counts}); killed {outcome.killed_share:.0%}"
        f" (timeouts included) of those with tests (goal {GOAL:.0%});"
        f" {outcome.seconds:.0f} s with {jobs} process(es).",
    ]
    if outcome.survivors:
        lines += ["", "Survivors (each needs a test or an explanation):", ""]
        if diffs:
            for name, diff in outcome.survivors.items():
                lines += [f"`{name}`:", "", "```diff", diff, "```", ""]
        else:
            lines += [f"- `{name}`" for name in outcome.survivors] + [""]
    lines += [
        f"- Machine: {harness.machine(pinned=False)}.",
        "",
        f"Command: `{command_line()}`",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(TARGETS))
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    parser.add_argument("--write", action="store_true", help="update docs/mutation-testing.md")
    parser.add_argument("--list", action="store_true", help="the modules and their tests")
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}: choose from {', '.join(TARGETS)}")
    if args.list or not args.modules:
        for name, target in TARGETS.items():
            print(f"{name}: {target.source} <- {' '.join(target.tests)}")
        return 0
    below_goal = []
    for module in args.modules:
        outcome = run_module(module, args.jobs)
        print(f"## {module}\n{report(outcome, args.jobs, diffs=True)}\n")
        if args.write:
            body = report(outcome, args.jobs, diffs=False)
            harness.write_section(f"mutation-{module}", f"Mutation testing: {module}", body, DOC)
        if outcome.killed_share < GOAL:
            below_goal.append(f"{module}: {outcome.killed_share:.0%} killed")
    for line in below_goal:
        print("FAIL:", line, file=sys.stderr)
    return 1 if below_goal else 0


if __name__ == "__main__":
    sys.exit(main())
