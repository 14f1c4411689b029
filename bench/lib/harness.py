"""What the load benchmarks share: server processes pinned to a core, their CPU
and memory from /proc, accounts, an engine repository, runs, and the doc writer.

The server processes come from tests/web/live_server.py (the same helper the
test suite uses); this module adds pinning, the raw-ASGI baseline and metrics.
"""

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import uvloop

from bench.lib.command import command_line
from tests.web.live_server import (
    PASSWORD,
    Server,
    accounts_of,
    free_port,
    start_server,
    stop,
    wait_until_serving,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"
SERVER_CPU, CLIENT_CPU = "0", 1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def pin_self_to_client_core() -> None:
    """The load generator runs on the other core than the server."""
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {CLIENT_CPU})


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    return sum(user_and_system_seconds(Path(f"/proc/{pid}/stat")))


def user_and_system_seconds(stat: Path) -> tuple[float, float]:
    """utime and stime from a /proc `stat` file (a process's or one thread's)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def steal_seconds(*cpus: int | str) -> tuple[float, ...]:
    """Time the hypervisor ran something else while each of `cpus` wanted to run
    (steal, from one read of /proc/stat; 0 for a CPU it does not list): on a
    shared host it is the noise no repetition removes."""
    steal: dict[str, float] = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name.startswith("cpu"):
            steal[name] = int(ticks[7]) / CLOCK_TICKS
    return tuple(steal.get(f"cpu{cpu}", 0.0) for cpu in cpus)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def self_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


@dataclass
class Accounts:
    workers: list[tuple[str, str]]  # (username, token) the fleet uses
    owner: str  # token of the user who submits runs
    approver: str  # token of the approver who approves them


@dataclass
class Rounds:
    """One thing measured once a round, the others measured in turn with it."""

    name: str
    values: list[float] = field(default_factory=list)  # one a round

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def listed(self) -> str:
        """Each round's figure, to show beside the median."""
        return ", ".join(f"{value:.0f}" for value in self.values)


def create_accounts(data_dir: Path, database_url: str, users: int) -> Accounts:
    """Accounts made in-process (cheap argon2, as the test suite's)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with accounts_of(data_dir, database_url) as accounts:
        accounts.create_user("root", PASSWORD, approver=True)
        tokens = []
        for index in range(users):
            name = f"fleet{index}"
            accounts.create_user(name, PASSWORD)
            tokens.append((name, accounts.create_token(name, "fleet")))
        approver = accounts.create_token("root", "bench")
    return Accounts(tokens, tokens[0][1], approver)


def make_repo(directory: Path) -> str:
    """A local engine repository with `master` and `patch` branches (file:// URL)."""
    directory.mkdir(parents=True, exist_ok=True)
    for args in (
        ["init", "-q", "-b", "master"],
        ["commit", "-q", "--allow-empty", "-m", "base"],
        ["checkout", "-q", "-b", "patch"],
        ["commit", "-q", "--allow-empty", "-m", "patch"],
    ):
        subprocess.run(
            ["git", "-c", "user.email=b@example.org", "-c", "user.name=b", *args],
            cwd=directory,
            check=True,
            capture_output=True,
        )
    return f"file://{directory}"


def submit_runs(url: str, accounts: Accounts, repo: str, count: int) -> list[str]:
    """`count` approved SPRT(-1, 1) runs at 10+0.1 with the most games a run may have.

    The fleet's results are symmetric, so these runs never decide and stay live.
    """
    body = {
        "tests_repo": repo,
        "new_tag": "patch",
        "base_tag": "master",
        "num_games": 3_200_000,
        "tc": "10+0.1",
        "sprt": {"elo0": -1, "elo1": 1, "elo_model": "normalized"},
    }
    run_ids = []
    with httpx.Client(base_url=url, timeout=30.0) as client:
        for _ in range(count):
            owner = {"authorization": f"Bearer {accounts.owner}"}
            reply = client.post("/api/runs", json=body, headers=owner)
            reply.raise_for_status()
            run_id = reply.json()["run_id"]
            approver = {"authorization": f"Bearer {accounts.approver}"}
            client.post(f"/api/runs/{run_id}/approve", headers=approver).raise_for_status()
            run_ids.append(run_id)
    return run_ids


def start_arbiter(
    data_dir: Path,
    database_url: str = "",
    port: int | None = None,
    *,
    pin: bool = True,
    source: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    ready: str = "/api/active_runs",
) -> Server:
    """An Arbiter primary with its background jobs, pinned to the server core;
    from the package under `source` (a checkout's `src`) instead of this one's;
    `extra_env` adds to (or overrides) its environment; started once `ready`
    answers 200 (a standby's: /healthz)."""
    env = {"ARBITER_LOG_LEVEL": "warning", **(extra_env or {})}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    cpus = SERVER_CPU if pin else ""
    return start_server(data_dir, database_url, env, port=port, cpus=cpus, ready=ready)


def start_hello(log_dir: Path, port: int | None = None) -> Server:
    """The raw-ASGI baseline on Arbiter's uvicorn setup, on the server's core."""
    port = port or free_port()
    log = log_dir / f"hello-{port}.log"
    args = [
        "taskset",
        "-c",
        SERVER_CPU,
        sys.executable,
        str(ROOT / "bench" / "lib" / "hello_app.py"),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*args, "--port", str(port)], stdout=sink, stderr=subprocess.STDOUT, text=True, env=env
        )
    server = Server(process, f"http://127.0.0.1:{port}", log)
    wait_until_serving(server)
    return server


def port_of(server: Server) -> int:
    return server.port


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory, kept when ARBITER_BENCH_KEEP=1 (to read server logs)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if os.environ.get("ARBITER_BENCH_KEEP") != "1":
            subprocess.run(["rm", "-rf", str(path)], check=False)


@contextmanager
def source_tree(rev: str, prefix: str) -> Iterator[Path]:
    """REV checked out into a temporary git worktree; its `src`."""
    with scratch_dir(prefix) as scratch:
        tree = scratch / "tree"
        git = ["git", "-C", str(ROOT)]
        subprocess.run([*git, "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
        try:
            yield tree / "src"
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False)


@contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        stop(server)


def server_errors(server: Server) -> list[str]:
    """Unhandled exceptions the server logged (each is a 500 or worse)."""
    lines = server.output().splitlines()
    return [line for line in lines if "unhandled error" in line or line.startswith("Traceback")]


def machine(*, pinned: bool = True) -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    where = (
        f"server pinned to CPU {SERVER_CPU}, load generator to CPU {CLIENT_CPU}"
        if pinned
        else "app in-process, not pinned"
    )
    return (
        f"{os.cpu_count()} vCPU ({model}), {_memory_gib()} GiB, Linux {platform.release()},"
        f" Python {platform.python_version()}; {where}; other engineers' jobs shared the machine;"
        f" measured on {datetime.date.today().isoformat()}"
    )


def _memory_gib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20)
    return 0


def write_section(key: str, title: str, body: str, doc: Path = DOC) -> None:
    """Replace the `key` section of `doc` (appended when absent)."""
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    text = doc.read_text()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"
    else:
        text = text.rstrip("\n") + f"\n\n### {title}\n\n{begin}\n{body}\n{end}\n"
    doc.write_text(text)


Scenario = Callable[[argparse.Namespace], Awaitable[tuple[list[str], list[str]]]]


def run_scenario(
    script: str, scenarios: Mapping[str, Scenario], titles: Mapping[str, str], args: Any
) -> int:
    """Run `args.scenario` from this (client) core and print its report; `--write`
    puts it in docs/benchmarks.md as section `<script>-<scenario>`. A scenario
    returns its report lines and its failed gates: exit status 1 if any failed."""
    pin_self_to_client_core()
    lines, failed = uvloop.run(scenarios[args.scenario](args))
    command = command_line()
    body = "\n".join([*lines, f"- Machine: {machine()}.", "", f"Command: `{command}`"])
    print(body)
    if args.write:
        write_section(f"{script}-{args.scenario}", titles[args.scenario], body)
    for line in failed[:20]:
        print("FAIL:", line, file=sys.stderr)
    return 1 if failed else 0


def wall() -> float:
    return time.monotonic()
