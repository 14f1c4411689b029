"""What the server itself saw in a benchmark's window, from its `/metrics`: the
garbage collector's pauses (arbiter_gc_pause_seconds, timed by the serving
process), why request_task calls were told "too busy"
(arbiter_request_task_too_busy_total: the admission gate), the worker calls
turned away while the event loop lagged (arbiter_overload_shed_calls_total),
how long commits took and how many update_task calls each carried
(arbiter_commit_duration_seconds, arbiter_update_batch_size), and how long the
app itself took over each worker call (arbiter_request_duration_seconds: from
the call's start in the app to its reply's end, so without the time a request
waits for the event loop before that), to set beside what the clients saw.

Scraped at the window's start and end; the difference is what the window saw.
"""

import math
from dataclasses import dataclass, field

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
COMMITS = "arbiter_commit_duration_seconds"
UPDATE_BATCHES = "arbiter_update_batch_size"
SLOW_COMMIT = 0.025  # s; a bucket bound of the histogram
REQUESTS = "arbiter_request_duration_seconds"
WORKER_ROUTES = ("/api/request_task", "/api/update_task", "/api/beat")


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
class Buckets:
    """A histogram's totals (of one set of labels): the count at or under each
    bucket's upper bound (the last bound infinite), and the sum of what it observed."""

    cumulative: dict[float, float] = field(default_factory=dict)
    total: float = 0.0

    def __sub__(self, earlier: "Buckets") -> "Buckets":
        return Buckets(
            {le: n - earlier.cumulative.get(le, 0.0) for le, n in self.cumulative.items()},
            self.total - earlier.total,
        )

    @property
    def count(self) -> float:
        return self.cumulative.get(math.inf, 0.0)

    def bound(self, q: float) -> float:
        """The least bucket bound at or under which a share q of the observations lie."""
        return next(le for le, n in sorted(self.cumulative.items()) if n >= q * self.count)

    def over(self, le: float) -> float:
        return self.count - self.cumulative.get(le, 0.0)


@dataclass(frozen=True)
class Snapshot:
    """Totals so far: pauses by generation ("0", "1", "2"), "too busy" replies
    by reason and histograms by name; each empty if the server does not report it."""

    pauses: dict[str, Pauses]
    too_busy: dict[str, float]
    histograms: dict[str, Buckets] = field(default_factory=dict)

    def __sub__(self, earlier: "Snapshot") -> "Snapshot":
        return Snapshot(
            difference(self.pauses, earlier.pauses),
            {r: n - earlier.too_busy.get(r, 0.0) for r, n in self.too_busy.items()},
            {h: b - earlier.histograms.get(h, Buckets()) for h, b in self.histograms.items()},
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
    histograms = {
        name: buckets(families[name]) for name in (COMMITS, UPDATE_BATCHES) if name in families
    }
    if REQUESTS in families:
        for route in WORKER_ROUTES:
            histograms[route] = buckets(families[REQUESTS], route=route)
    return Snapshot(pauses(families.get(METRIC)), too_busy, histograms)


def counts(families: dict[str, Metric], name: str, label: str) -> dict[str, float]:
    """A labelled counter's totals by that label's value (empty if not reported)."""
    family = families.get(name)
    samples = family.samples if family else []
    return {
        sample.labels[label]: sample.value for sample in samples if sample.name == name + "_total"
    }


def buckets(family: Metric, **labels: str) -> Buckets:
    """A histogram's totals, of the samples with these labels."""
    samples = [s for s in family.samples if labels.items() <= s.labels.items()]
    cumulative = {
        float(sample.labels["le"]): sample.value
        for sample in samples
        if sample.name == family.name + "_bucket"
    }
    total = sum(sample.value for sample in samples if sample.name == family.name + "_sum")
    return Buckets(cumulative, total)


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


def describe_commits(window: dict[str, Buckets]) -> str:
    """One report line: the window's commits and the update_task calls they carried."""
    commits = window.get(COMMITS, Buckets())
    if not commits.count:
        return "- Commits: none reported in the window."
    line = (
        f"- Commits in the window: {commits.count:.0f}, mean"
        f" {commits.total / commits.count * 1000:.2f} ms, p99 at most"
        f" {commits.bound(0.99) * 1000:g} ms, {commits.over(SLOW_COMMIT):.0f} over"
        f" {SLOW_COMMIT * 1000:g} ms"
    )
    batches = window.get(UPDATE_BATCHES, Buckets())
    if batches.count:
        line += (
            f"; update_task batches {batches.count:.0f}, mean"
            f" {batches.total / batches.count:.1f} calls, p99 at most {batches.bound(0.99):g}"
        )
    return line + "."


def describe_app_latency(window: dict[str, Buckets]) -> str:
    """One report line: the worker calls' p99 as the app timed them."""
    parts = [
        f"{route.removeprefix('/api/')} {window[route].bound(0.99) * 1000:g} ms"
        for route in WORKER_ROUTES
        if window.get(route, Buckets()).count
    ]
    if not parts:
        return "- The app's own latency: not reported in the window."
    return (
        "- The app's own latency (from a call's start in the app to its reply's end;"
        " a bucket bound), p99 at most: " + ", ".join(parts) + "."
    )
