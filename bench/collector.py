"""The garbage collector's pauses in a benchmark's window, from the server's
`/metrics` (arbiter_gc_pause_seconds, timed by the serving process itself).

Scraped at the window's start and end; the difference is what the window saw.
"""

from dataclasses import dataclass

import httpx2 as httpx
from prometheus_client.parser import text_string_to_metric_families

METRIC = "arbiter_gc_pause_seconds"
LONG_PAUSE = 0.02  # s; a bucket bound of the histogram
GENERATIONS = {"0": "young", "1": "middle", "2": "full"}


@dataclass(frozen=True)
class Pauses:
    """One generation's collections: how many, their total, how many were long."""

    count: float = 0.0
    seconds: float = 0.0
    long: float = 0.0

    def __sub__(self, earlier: "Pauses") -> "Pauses":
        return Pauses(
            self.count - earlier.count, self.seconds - earlier.seconds, self.long - earlier.long
        )


def scrape(url: str) -> dict[str, Pauses]:
    """The totals so far by generation ("0", "1", "2"); empty if the server has none."""
    text = httpx.get(url + "/metrics", timeout=10.0).text
    count: dict[str, float] = {}
    seconds: dict[str, float] = {}
    short: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != METRIC:
            continue
        for sample in family.samples:
            generation = sample.labels["generation"]
            if sample.name == METRIC + "_count":
                count[generation] = sample.value
            elif sample.name == METRIC + "_sum":
                seconds[generation] = sample.value
            elif sample.name == METRIC + "_bucket" and float(sample.labels["le"]) == LONG_PAUSE:
                short[generation] = sample.value
    return {g: Pauses(count[g], seconds.get(g, 0.0), count[g] - short.get(g, 0.0)) for g in count}


def difference(end: dict[str, Pauses], start: dict[str, Pauses]) -> dict[str, Pauses]:
    return {g: end[g] - start.get(g, Pauses()) for g in end}


def describe(window: dict[str, Pauses]) -> str:
    """One report line."""
    if not window:
        return "- Collector pauses: not reported by this server."
    parts = []
    for generation, name in GENERATIONS.items():
        pauses = window.get(generation, Pauses())
        if not pauses.count:
            parts.append(f"{name} none")
            continue
        mean_ms = pauses.seconds / pauses.count * 1000
        parts.append(
            f"{name} {pauses.count:.0f} (mean {mean_ms:.1f} ms,"
            f" {pauses.long:.0f} over {LONG_PAUSE * 1000:.0f} ms)"
        )
    return "- Collector pauses in the window: " + "; ".join(parts) + "."
