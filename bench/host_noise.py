"""Which seconds of a benchmark's window the host was busy in, and how the slow
replies fell among them.

On a shared host the hypervisor runs other guests on our vCPUs in bursts
(steal time). A burst that takes half the server's core for half a second
fills every queue, and the replies of that second and of the next, while the
queue drains, make a p99 by themselves; one that takes the load generator's
core makes its sends late, and the fleet counts a reply's latency from the
intended send. A fleet report gives its percentiles over the whole window, as
the goals count them. This module adds what separates the host's tail from
the code's: how many of the replies over their goal were sent in a second in
which the host took over NOISY_STEAL of either core, and the percentiles over
the other seconds. That second figure is a diagnostic, never the result.

The steal is sampled about once a second (`/proc/stat` counts it in ticks of
10 ms), so a second counts as busy when a sample overlapping it was.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.fleetsim import percentile

NOISY_STEAL = 0.10  # share of a core the host took in a second that counts as busy


@dataclass(frozen=True)
class StealSample:
    """The shares of the server's and the load generator's cores the host took
    over [start, end), in seconds from the window's start."""

    start: float
    end: float
    server: float
    client: float


def busy_seconds(samples: Sequence[StealSample], window: int) -> set[int]:
    """The seconds of the window that a sample over NOISY_STEAL overlaps."""
    busy: set[int] = set()
    for sample in samples:
        if max(sample.server, sample.client) > NOISY_STEAL:
            first, last = max(0, math.floor(sample.start)), min(window, math.ceil(sample.end))
            busy.update(range(first, last))
    return busy


def describe(
    latencies: Mapping[str, Sequence[float]],
    seconds: Mapping[str, Sequence[int]],
    samples: Sequence[StealSample],
    goals_ms: Mapping[str, float],
    window: int,
) -> str:
    """One report line: the busy seconds, the replies over their goal sent in
    them, and the p99 of each endpoint with a goal over the other seconds.
    `seconds[endpoint][i]` is the window's second of `latencies[endpoint][i]`."""
    if not samples:
        return "- The host's busy seconds: not sampled."
    busy = busy_seconds(samples, window)
    over_counts: list[str] = []
    quiet_p99: list[str] = []
    for endpoint, goal_ms in goals_ms.items():
        pairs = list(zip(latencies.get(endpoint, []), seconds.get(endpoint, []), strict=True))
        over = [second for took, second in pairs if took * 1000 > goal_ms]
        in_busy = sum(1 for second in over if second in busy)
        name = endpoint.removeprefix("/api/")
        over_counts.append(f"{name} {in_busy} of {len(over)}")
        quiet = [took for took, second in pairs if second not in busy]
        if quiet:
            quiet_p99.append(f"{name} {percentile(quiet, 99) * 1000:.2f} ms")
    return (
        f"- The host's busy seconds (it took over {NOISY_STEAL:.0%} of either core):"
        f" {len(busy)} of {window}. Replies over their goal sent in them: "
        + ", ".join(over_counts)
        + ". p99 over the other seconds (a diagnostic, not the result): "
        + (", ".join(quiet_p99) or "no reply")
        + "."
    )
