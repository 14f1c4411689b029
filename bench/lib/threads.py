"""Where a server's CPU goes, by thread: the event loop, the results thread, the
assignment thread.

A sampling profile that follows the GIL (bench/lib/profile.py) sees only Python
frames. SQLite's own work and the system calls under it run with the GIL
released, so a thread that spends its time there is mostly invisible to it:
the 10,000-worker fleet put the results thread at about 45% of the server's CPU
while its GIL-holding samples were under a fifth. The kernel's count per
thread (`/proc/<pid>/task/<tid>/stat`) has no such blind spot.

Threads are named by their Python names, read with `py-spy dump` (the OS
knows them all as "python"); without py-spy a thread is named by its id.
"""

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.lib.harness import CLIENT_CPU, user_and_system_seconds

# py-spy dump's line for each thread: `Thread 123 (idle): "arbiter-results"`.
_THREAD_LINE = re.compile(r'^Thread (\d+) \([^)]*\): "(.*)"$')
SHOWN_SHARE = 0.01  # threads with less of the server's CPU are summed as "others"


@dataclass(frozen=True)
class ThreadCpu:
    user: float  # s
    system: float  # s

    @property
    def total(self) -> float:
        return self.user + self.system


def thread_cpu(pid: int) -> dict[int, ThreadCpu]:
    """Each thread's CPU seconds so far, by thread id (threads that ended are gone)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            user, system = user_and_system_seconds(task / "stat")
        except FileNotFoundError:  # ended meanwhile
            continue
        found[int(task.name)] = ThreadCpu(user, system)
    return found


def spent(before: dict[int, ThreadCpu], after: dict[int, ThreadCpu]) -> dict[int, ThreadCpu]:
    """Each thread's CPU between two reads (a thread born meanwhile counts from 0)."""
    zero = ThreadCpu(0.0, 0.0)
    return {
        tid: ThreadCpu(
            now.user - before.get(tid, zero).user, now.system - before.get(tid, zero).system
        )
        for tid, now in after.items()
    }


def thread_names(pid: int) -> dict[int, str]:
    """Python's names of `pid`'s threads, from one `py-spy dump` (not pausing the
    process, on the load generator's core); {} without py-spy or if it fails."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    command = ["taskset", "-c", str(CLIENT_CPU), py_spy, "dump", "--pid", str(pid), "--nonblocking"]
    try:
        dump = subprocess.run(
            command, check=False, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for line in dump.splitlines():
        if match := _THREAD_LINE.match(line):
            names[int(match.group(1))] = match.group(2)
    return names


def describe(by_thread: dict[int, ThreadCpu], names: dict[int, str]) -> str:
    """One report line: each thread's share of the server's CPU in the window,
    with its user and system parts; the smallest summed."""
    whole = sum(cpu.total for cpu in by_thread.values())
    if whole <= 0:
        return "- Server CPU by thread: not measured."
    shown = []
    others = 0.0
    for tid, cpu in sorted(by_thread.items(), key=lambda item: -item[1].total):
        if cpu.total / whole < SHOWN_SHARE:
            others += cpu.total
            continue
        name = "event loop" if names.get(tid) == "MainThread" else names.get(tid, f"thread {tid}")
        shown.append(
            f"{name} {cpu.total / whole * 100:.0f}%"
            f" (user {cpu.user / whole * 100:.0f}, system {cpu.system / whole * 100:.0f})"
        )
    if others:
        shown.append(f"others {others / whole * 100:.0f}%")
    return "- Server CPU by thread (shares of the window's server CPU): " + "; ".join(shown) + "."
