"""What the server itself saw in a benchmark's window, from its `/metrics`: the
garbage collector's pauses (arbiter_gc_pause_seconds, timed by the serving
process), why request_task calls were told "too busy"
(arbiter_request_task_too_busy_total: the admission gate) and the worker calls
turned away while the event loop lagged (arbiter_overload_shed_calls_total).

Scraped at the window's start and end; the difference is what the window saw.
"""

from dataclasses import dataclass

import httpx2 as httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

METRIC = "arbiter_gc_pause_seconds"
TOO_BUSY = "arbiter_request_task_too_busy"
SHED = "arbiter_overload_shed_calls"
TOO_BUSY_REASONS = {
    "gate_full": "the gate full",
    "account_share": "an account past its share",
    "overload": "the loop lagging",
}
SHED_503 = "overload 503"  # the other worker calls turned away with it
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


@dataclass(frozen=True)
class Snapshot:
    """Totals so far: pauses by generation ("0", "1", "2") and "too busy" replies
    by reason; each empty if the server does not report it."""

    pauses: dict[str, Pauses]
    too_busy: dict[str, float]

    def __sub__(self, earlier: "Snapshot") -> "Snapshot":
        return Snapshot(
            difference(self.pauses, earlier.pauses),
            {r: n - earlier.too_busy.get(r, 0.0) for r, n in self.too_busy.items()},
        )


def scrape(url: str) -> Snapshot:
    """The server's totals so far."""
    text = httpx.get(url + "/metrics", timeout=10.0).text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    too_busy = counts(families, TOO_BUSY, "reason")
    shed = counts(families, SHED, "reply")
    if shed:
        too_busy["overload"] = shed.get("too_busy", 0.0)
        too_busy[SHED_503] = shed.get("503", 0.0)
    return Snapshot(pauses(families.get(METRIC)), too_busy)


def counts(families: dict[str, Metric], name: str, label: str) -> dict[str, float]:
    """A labelled counter's totals by that label's value (empty if not reported)."""
    family = families.get(name)
    samples = family.samples if family else []
    return {
        sample.labels[label]: sample.value for sample in samples if sample.name == name + "_total"
    }


def pauses(family: Metric | None) -> dict[str, Pauses]:
    count: dict[str, float] = {}
    seconds: dict[str, float] = {}
    short: dict[str, float] = {}
    if family is not None:
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


def describe_too_busy(window: dict[str, float]) -> str:
    """The reasons part of the report's "too busy" line ("" if not reported)."""
    if not window:
        return ""
    reasons = ", ".join(
        f"{name} {window.get(r, 0.0):.0f}"
        for r, name in TOO_BUSY_REASONS.items()
        if r in window or r != "overload"  # a server from before the shedding's count
    )
    shed = window.get(SHED_503)
    others = "" if shed is None else f"; other worker calls turned away with a 503: {shed:.0f}"
    return f" (the server's reasons: {reasons}{others})"
