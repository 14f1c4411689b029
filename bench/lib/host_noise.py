"""Which seconds of a benchmark's window the host was busy in, and how the slow
replies fell among them.

On a shared host the hypervisor runs other guests on our vCPUs in bursts
(steal time). A burst that takes half the server's core for half a second
fills every queue, and the replies of that second and of the next, while the
queue drains, make a p99 by themselves; one that takes the load generator's
core makes its sends late, and the fleet counts a reply's latency from the
intended send. A fleet report gives its percentiles over the whole window, as
the goals count them. This module adds what separates the host's tail from
the code's: how many of the replies over their goal (and of the "too busy"
replies) were sent in a second in which the host took over NOISY_STEAL of
either core, and the same figures over the other seconds. Those are a
diagnostic, never the result: steal accrues only while a vCPU wants to run,
so a second the server was busy in has more room for it.

The steal is sampled about once a second (`/proc/stat` counts it in ticks of
10 ms), so a second counts as busy when a sample overlapping it was.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.lib.fleetsim import percentile

NOISY_STEAL = 0.10  # share of a core the host took in a second that counts as busy
TOO_BUSY = "request_task too busy"
ANSWERED = "request_task answered"


@dataclass(frozen=True)
class StealSample:
    """The shares of the server's and the load generator's cores the host took
    over [start, end), in seconds from the window's start."""

    start: float
    end: float
    server: float
    client: float


@dataclass(frozen=True)
class Timeline:
    """A window's replies and events by the second they were sent in, beside the
    host's steal. `seconds[endpoint][i]` is the second of `latencies[endpoint][i]`."""

    latencies: Mapping[str, Sequence[float]]
    seconds: Mapping[str, Sequence[int]]
    events: Mapping[tuple[str, int], int]  # by (event, second)
    samples: Sequence[StealSample]
    window: int

    def busy_seconds(self) -> set[int]:
        """The seconds of the window that a sample over NOISY_STEAL overlaps."""
        busy: set[int] = set()
        for sample in self.samples:
            if max(sample.server, sample.client) > NOISY_STEAL:
                first = max(0, math.floor(sample.start))
                busy.update(range(first, min(self.window, math.ceil(sample.end))))
        return busy


def describe(timeline: Timeline, goals_ms: Mapping[str, float]) -> str:
    """One report line: the busy seconds; the replies over their goal and the "too
    busy" replies sent in them; the p99 of each endpoint with a goal, and the
    share of "too busy", over the other seconds."""
    if not timeline.samples:
        return "- The host's busy seconds: not sampled."
    busy = timeline.busy_seconds()
    over_counts: list[str] = []
    quiet_p99: list[str] = []
    for endpoint, goal_ms in goals_ms.items():
        pairs = list(
            zip(
                timeline.latencies.get(endpoint, []),
                timeline.seconds.get(endpoint, []),
                strict=True,
            )
        )
        over = [second for took, second in pairs if took * 1000 > goal_ms]
        name = endpoint.removeprefix("/api/")
        over_counts.append(f"{name} {sum(1 for s in over if s in busy)} of {len(over)}")
        quiet = [took for took, second in pairs if second not in busy]
        if quiet:
            quiet_p99.append(f"{name} {percentile(quiet, 99) * 1000:.2f} ms")
    refused = _count(timeline, TOO_BUSY, busy, quiet=False)
    refused_quiet = _count(timeline, TOO_BUSY, busy, quiet=True)
    asked_quiet = refused_quiet + _count(timeline, ANSWERED, busy, quiet=True)
    return (
        f"- The host's busy seconds (it took over {NOISY_STEAL:.0%} of either core):"
        f" {len(busy)} of {timeline.window}. Sent in them: replies over their goal "
        + ", ".join(over_counts)
        + f'; "too busy" {refused} of {refused + refused_quiet}.'
        " Over the other seconds (a diagnostic, not the result): p99 "
        + (", ".join(quiet_p99) or "no reply")
        + f'; "too busy" {refused_quiet / max(1, asked_quiet) * 100:.3f}%.'
    )


def _count(timeline: Timeline, event: str, busy: set[int], *, quiet: bool) -> int:
    return sum(
        n
        for (name, second), n in timeline.events.items()
        if name == event and (second in busy) != quiet
    )
