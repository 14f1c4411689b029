"""Sampling profiles of a benchmark's server, with py-spy.

bench/fleet.py --profile FILE attaches py-spy to the primary for the
measurement window and writes its collapsed stacks (py-spy's "raw" format, one
line a stack: `frame;frame;... count`) to FILE, kept out of the repository.
Turn FILE into a flame graph with any collapsed-stack tool (inferno,
flamegraph.pl, speedscope), or summarise it here:

  .venv/bin/python bench/lib/profile.py FILE [--top 25]

The summary gives each worker endpoint's share of the samples (the stacks that
pass through its handler), and the functions with the most samples of their
own ("self") and under them ("total"), overall or within one endpoint
(--endpoint update_task).
"""

import argparse
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# Frames that tie a stack to an endpoint: its handler on the event loop, or the
# service it runs in a thread (endpoint, function, file). The innermost wins.
ENDPOINT_FRAMES = (
    ("request_version", "request_version", "arbiter/web/api.py"),
    ("request_task", "request_task", "arbiter/web/worker_api.py"),
    ("request_task", "_serve", "arbiter/domain/runs/scheduler.py"),
    ("update_task", "update_task", "arbiter/web/worker_api.py"),
    ("update_task", "update_task", "arbiter/domain/runs/ingest.py"),
    ("update_task", "_serve", "arbiter/domain/runs/update_batches.py"),
    ("beat", "beat", "arbiter/web/worker_api.py"),
    ("beat", "beat", "arbiter/domain/runs/ingest.py"),
    ("failed_task", "failed_task", "arbiter/web/worker_api.py"),
    ("authentication", "authenticated_worker", "arbiter/web/api.py"),
    ("authentication", "authenticate_worker", "arbiter/domain/accounts/authentication.py"),
)
ENDPOINTS = sorted({endpoint for endpoint, _, _ in ENDPOINT_FRAMES})


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: scripts/venv test")
    return found


def record(
    pid: int, seconds: float, output: Path, cpu: int | None = None
) -> subprocess.Popen[bytes]:
    """Start py-spy on `pid` for `seconds` (100 samples/s, the process not paused,
    the thread holding the GIL only),
    pinned to `cpu` so that its own work stays off the server's core."""
    command = [
        py_spy(),
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, round(seconds))),
        "--rate",
        "100",
        "--nonblocking",
        # Only the thread holding the GIL: where the interpreter's time goes, not
        # the threads waiting on a lock, a queue or the disk.
        "--gil",
        "--format",
        "raw",
        "--output",
        str(output),
    ]
    if cpu is not None:
        command = ["taskset", "--cpu-list", str(cpu), *command]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@dataclass
class Profile:
    stacks: Counter[tuple[str, ...]]

    @classmethod
    def load(cls, path: Path) -> "Profile":
        stacks: Counter[tuple[str, ...]] = Counter()
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks[tuple(stack.split(";"))] += int(count)
        return cls(stacks)

    @property
    def total(self) -> int:
        return sum(self.stacks.values())

    def endpoint_of(self, stack: tuple[str, ...]) -> str | None:
        for frame in reversed(stack):
            name = frame.split(" ", 1)[0].rsplit(".", 1)[-1]  # a method's class dropped
            for endpoint, function, where in ENDPOINT_FRAMES:
                if name == function and where in frame:
                    return endpoint
        return None

    def threads_share(self) -> float:
        """Samples taken in threads other than the event loop's."""
        threads = sum(n for s, n in self.stacks.items() if "_bootstrap" in s[0])
        return threads / (self.total or 1)

    def by_endpoint(self) -> Counter[str]:
        shares: Counter[str] = Counter()
        for stack, count in self.stacks.items():
            shares[self.endpoint_of(stack) or "(outside the handlers)"] += count
        return shares

    def only(self, endpoint: str) -> "Profile":
        return Profile(
            Counter({s: n for s, n in self.stacks.items() if self.endpoint_of(s) == endpoint})
        )

    def functions(self) -> tuple[Counter[str], Counter[str]]:
        """Samples by function: on top of the stack (self), anywhere in it (total)."""
        own: Counter[str] = Counter()
        under: Counter[str] = Counter()
        for stack, count in self.stacks.items():
            own[_function(stack[-1])] += count
            for frame in set(map(_function, stack)):
                under[frame] += count
        return own, under


def _function(frame: str) -> str:
    """`name (path/file.py:123)` -> `name (path/file.py)`: lines merged."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0].rstrip(')')})" if where else name


def summary(profile: Profile, top: int) -> str:
    total = profile.total or 1
    lines = [
        f"samples: {profile.total} ({profile.threads_share():.0%} in threads)",
        "",
        "by endpoint (innermost handler or service frame):",
    ]
    for name, count in profile.by_endpoint().most_common():
        lines.append(f"  {count / total:6.1%}  {name}")
    own, under = profile.functions()
    for title, counter in (("self", own), ("total", under)):
        lines += ["", f"functions by {title} samples:"]
        for name, count in counter.most_common(top):
            lines.append(f"  {count / total:6.1%}  {name}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="collapsed stacks from fleet.py --profile")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--endpoint", choices=ENDPOINTS, help="only this one")
    args = parser.parse_args()
    profile = Profile.load(args.file)
    if args.endpoint:
        profile = profile.only(args.endpoint)
    print(summary(profile, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
