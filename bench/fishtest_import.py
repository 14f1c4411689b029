"""`arbiter import fishtest` on a large synthetic dump: import rate
and peak memory.

Writes a mongodump of `--runs` finished SPRT runs (each with `--tasks`
tasks, in the reference's document shapes), `--actions` actions and `--users`
users, one document at a time (the generator holds one document, not the
dump), then runs `python -m arbiter import fishtest` on it in a child
process against a fresh SQLite data dir, with production argon2 costs.
Measured: the wall time of the whole command (import and check), each
collection's rate (the progress bar's last line), and the child's peak RSS
(`getrusage(RUSAGE_CHILDREN)`), which stays flat as the dump grows when
documents are streamed.

    .venv/bin/python bench/fishtest_import.py [--runs 100000 --actions 1000000] [--write]

The issue's figure is for 100,000 runs and 1,000,000 actions (the defaults);
docs/benchmarks.md says at which scale its figures were measured.
"""

import argparse
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bson
from bson import ObjectId

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arbiter.stats.llr import llr, sprt_bounds

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- fishtest-import:begin -->", "<!-- fishtest-import:end -->"
T0 = datetime(2022, 1, 1, tzinfo=UTC)
PROGRESS = re.compile(r"^(\w+)\s+\[#+\s*\]\s+100\.0%\s+([\d,]+) docs\s+([\d,]+)/s", re.M)


def oid(kind: int, n: int) -> ObjectId:
    return ObjectId(f"{int(T0.timestamp()) + n // 1000:08x}{kind:02x}{n:014x}")


def _task(n: int, start: int) -> dict[str, Any]:
    pentanomial = [2 + n % 3, 20, 50 + n % 7, 22, 6]
    pairs = sum(pentanomial)
    wins = 2 * pentanomial[4] + pentanomial[3]
    losses = 2 * pentanomial[0] + pentanomial[1]
    return {
        "num_games": 2 * pairs,
        "active": False,
        "last_updated": T0 + timedelta(minutes=n),
        "start": start,
        "stats": {
            "wins": wins,
            "losses": losses,
            "draws": 2 * pairs - wins - losses,
            "crashes": 0,
            "time_losses": 0,
            "pentanomial": pentanomial,
        },
        "worker_info": {
            "uname": "Linux",
            "architecture": ["64bit", "ELF"],
            "concurrency": 8,
            "max_memory": 16000,
            "min_threads": 1,
            "username": f"user{n % 500}",
            "version": 325,
            "python_version": [3, 11, 2],
            "gcc_version": [12, 2, 0],
            "compiler": "g++",
            "unique_key": f"{n % 5000:08x}-0000-0000-0000-000000000000",
            "modified": False,
            "worker_arch": "x86-64-avx2",
            "ARCH": "x86-64-avx2",
            "nps": 1.0e6,
            "near_github_api_limit": False,
            "remote_addr": "192.0.2.1",
            "country_code": "NL",
        },
    }


def run_document(n: int, tasks: int) -> dict[str, Any]:
    task_list, start = [], 0
    for i in range(tasks):
        task_list.append(_task(n * tasks + i, start))
        start += task_list[-1]["num_games"]
    results = {key: sum(t["stats"][key] for t in task_list) for key in ("wins", "losses", "draws")}
    results |= {"crashes": 0, "time_losses": 0}
    results["pentanomial"] = [
        sum(t["stats"]["pentanomial"][i] for t in task_list) for i in range(5)
    ]
    lower, upper = sprt_bounds(0.05, 0.05)
    sprt = {
        "alpha": 0.05,
        "beta": 0.05,
        "elo0": 0.0,
        "elo1": 2.0,
        "elo_model": "normalized",
        "state": "rejected",
        "llr": llr("normalized", 0.0, 2.0, results["pentanomial"]),
        "batch_size": 8,
        "lower_bound": lower,
        "upper_bound": upper,
        "lost_samples": 0,
    }
    return {
        "_id": oid(1, n),
        "version": 24,
        "start_time": T0 + timedelta(minutes=n),
        "last_updated": T0 + timedelta(minutes=n + 60),
        "tc_base": 10.0,
        "approved": True,
        "approver": "approver",
        "finished": True,
        "deleted": False,
        "failed": False,
        "failures": 0,
        "is_green": False,
        "is_yellow": False,
        "workers": 0,
        "cores": 0,
        "committed_games": start,
        "total_games": start,
        "results": results,
        "nps": 0.0,
        "games_per_minute": 0.0,
        "args": {
            "base_tag": "master",
            "new_tag": f"patch{n}",
            "base_nets": [],
            "new_nets": [],
            "num_games": 80000,
            "tc": "10+0.1",
            "new_tc": "10+0.1",
            "book": "UHO_Lichess_4852_v1.epd",
            "book_depth": "8",
            "threads": 1,
            "resolved_base": "a" * 40,
            "resolved_new": "b" * 40,
            "msg_base": "base",
            "msg_new": f"patch {n}",
            "base_options": "Hash=16",
            "new_options": "Hash=16",
            "info": f"synthetic run {n}",
            "base_signature": "1234567",
            "new_signature": "1234568",
            "username": f"user{n % 500}",
            "tests_repo": "https://github.com/user/Stockfish",
            "auto_purge": False,
            "throughput": 100,
            "itp": 100.0,
            "priority": 0.0,
            "adjudication": True,
            "sprt": sprt,
        },
        "tasks": task_list,
        "bad_tasks": [],
    }


def action_document(n: int, runs: int) -> dict[str, Any]:
    run = n % max(runs, 1)
    return {
        "_id": oid(2, n),
        "time": T0.timestamp() + n * 0.5,
        "action": "failed_task" if n % 3 else "new_run",
        "username": f"user{n % 500}",
        "run_id": str(oid(1, run)),
        "run": f"patch{run}-abcdef0",
        "task_id": n % 4,
        "worker": f"user{n % 500}-8cores-{n % 5000:08x}-0000",
        "message": "synthetic",
    }


def user_document(n: int) -> dict[str, Any]:
    return {
        "_id": oid(3, n),
        "username": f"user{n}",
        "password": f"a password of user {n}",
        "registration_time": T0,
        "pending": False,
        "blocked": False,
        "email": f"user{n}@example.org",
        "groups": ["group:approvers"] if n == 0 else [],
        "tests_repo": "",
        "machine_limit": 16,
    }


def write(path: Path, documents: Iterator[dict[str, Any]]) -> int:
    count = 0
    with path.open("wb") as file:
        for document in documents:
            file.write(bson.encode(document))
            count += 1
    return count


def make_dump(directory: Path, runs: int, tasks: int, actions: int, users: int) -> Path:
    db = directory / "dump" / "fishtest_new"
    db.mkdir(parents=True)
    write(db / "users.bson", (user_document(n) for n in range(users)))
    write(db / "runs.bson", (run_document(n, tasks) for n in range(runs)))
    write(db / "actions.bson", (action_document(n, runs) for n in range(actions)))
    return db.parent


def measure(dump: Path, data: Path) -> tuple[float, int, str, str]:
    """(seconds, peak RSS in KiB, stdout, stderr) of one import in a child process."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "arbiter", "import", "fishtest", str(dump), "--data-dir", str(data)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"import failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, peak, done.stdout, done.stderr


def report(args: argparse.Namespace, seconds: float, peak_kib: int, out: str, err: str) -> str:
    rates = {name: (docs, rate) for name, docs, rate in PROGRESS.findall(err)}
    rows = [f"| {name} | {docs} | {rate} |" for name, (docs, rate) in rates.items()]
    check = next((line for line in out.splitlines() if line.startswith("check:")), "")
    phases = {
        found[1]: float(found[2])
        for found in re.finditer(r"^(import|check) took ([\d.]+) s$", out, re.M)
    }
    total = args.runs + args.actions + args.users
    return "\n".join(
        [
            f"Dump: {args.runs:,} finished SPRT runs of {args.tasks} tasks each, "
            f"{args.actions:,} actions, {args.users:,} users (production argon2 costs); "
            f"SQLite in a fresh data dir.",
            "",
            "| collection | documents | documents per second |",
            "|---|---:|---:|",
            *rows,
            "",
            f"Whole command: {seconds:.1f} s (import {phases.get('import', 0):.1f} s, "
            f"{total / phases.get('import', seconds):,.0f} documents per second; "
            f"check {phases.get('check', 0):.1f} s); peak RSS {peak_kib / 1024:.0f} MiB.",
            f"Check: `{check}`",
            f"Machine: {os.cpu_count()} CPUs (shared with other work), "
            f"{platform.processor() or platform.machine()}, Python {platform.python_version()};"
            f" measured on {datetime.now(UTC).date().isoformat()}.",
            f"Command: `.venv/bin/python bench/fishtest_import.py --runs {args.runs} "
            f"--actions {args.actions} --write`",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--actions", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--write", action="store_true", help=f"put the figures in {DOC.name}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fishtest-import-") as tmp:
        started = time.perf_counter()
        dump = make_dump(Path(tmp), args.runs, args.tasks, args.actions, args.users)
        size = sum(path.stat().st_size for path in dump.rglob("*.bson"))
        print(f"dump written: {size / 2**20:.0f} MiB in {time.perf_counter() - started:.0f} s")
        seconds, peak, out, err = measure(dump, Path(tmp) / "data")
    text = report(args, seconds, peak, out, err)
    print(text)
    if args.write:
        document = DOC.read_text()
        block = f"{BEGIN}\n{text}\n{END}"
        if BEGIN in document:
            head, rest = document.split(BEGIN, 1)
            document = head + block + rest.split(END, 1)[1]
        else:
            document = document.rstrip("\n") + "\n\n## Importing from Fishtest\n\n" + block + "\n"
        DOC.write_text(document)


if __name__ == "__main__":
    main()
