"""`/metrics`: what an operator alerts on, in Prometheus's text format.

Each app has a registry of its own (tests build many apps in one process):
requests by route, method and status with their latency (counted by
`AppMetrics.observe_request`, an observer of web/observed.py, on the event
loop), gauges read when the page is asked for (threadpool and admission gate
occupancy, live runs and workers, job queue depth, the primary's lease), and
the process-wide
histograms of `arbiter.telemetry` (commit latency, scheduling batch sizes) plus
the client library's process figures (CPU, memory, open files).

The page is served only to the addresses in `ARBITER_METRICS_ALLOW`; the
client address is the one uvicorn took from the proxy's `X-Forwarded-For`,
so a proxy that forwards a public request does not make it local.
"""

import ipaddress
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import accumulate

import anyio.to_thread
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Gauge,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from starlette.routing import Mount, Route
from starlette.types import Scope

from arbiter.runtime.settings import Network
from arbiter.telemetry import PROCESS_WIDE

# Latency buckets from a beat (sub-millisecond) to a slow page or upload.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class RequestStats:
    """Requests by (route, method, status) and latency buckets by route, kept as
    plain counters and handed to prometheus-client only when scraped.

    A request is on the hot path: the client library's labelled Counter and
    Histogram cost about 20 us a request on this machine (label lookups and
    locks), these dictionary updates about 1 us. Only the event loop touches
    them (the middleware and the `/metrics` handler), so they need no lock.
    """

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, int], int] = {}
        # per route: the count in each bucket (the last for +Inf), and the sum
        self.buckets: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        self.counts[key] = self.counts.get(key, 0) + 1
        buckets = self.buckets.get(route)
        if buckets is None:
            buckets = self.buckets[route] = [0] * (len(LATENCY_BUCKETS) + 1)
            self.sums[route] = 0.0
        buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.sums[route] += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "arbiter_requests",
            "HTTP requests answered, by route template, method and status",
            labels=("route", "method", "status"),
        )
        for (route, method, status), count in sorted(self.counts.items()):
            requests.add_metric((route, method, str(status)), count)
        yield requests
        latency = HistogramMetricFamily(
            "arbiter_request_duration_seconds",
            "Time from a request's start to its reply's end, by route template",
            labels=("route",),
        )
        bounds = [*(str(bound) for bound in LATENCY_BUCKETS), "+Inf"]
        for route, counts in sorted(self.buckets.items()):
            cumulative = list(accumulate(counts))
            latency.add_metric(
                (route,), list(zip(bounds, cumulative, strict=True)), self.sums[route]
            )
        yield latency


class AppMetrics:
    """One app's collectors. `observe_request` and `render` run on the event loop."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        for collector in PROCESS_WIDE:
            self.registry.register(collector)
        ProcessCollector(registry=self.registry)
        self.requests = RequestStats()
        self.registry.register(self.requests)
        self._gauges: dict[str, Gauge] = {}
        for name, text in GAUGES.items():
            self._gauges[name] = Gauge(f"arbiter_{name}", text, registry=self.registry)

    def observe_request(self, scope: Scope, method: str, status: int, seconds: float) -> None:
        """An observer of `ObservedRequestsMiddleware` (web/observed.py): a request
        without a reply counts as a 500."""
        self.requests.observe(route_label(scope), method, status or 500, seconds)

    def render(self, gauges: dict[str, float]) -> bytes:
        """The page, with the gauges set to the values read just now."""
        for name, value in gauges.items():
            self._gauges[name].set(value)
        return generate_latest(self.registry)


GAUGES = {
    "threadpool_threads_busy": "Threadpool threads running blocking calls",
    "threadpool_threads_limit": "Threadpool size (ARBITER_THREADPOOL_TOKENS)",
    "task_gate_places_held": "request_task calls queued for or inside a scheduling decision",
    "task_gate_places": "Places of that gate (ARBITER_TASK_SEMAPHORE_SIZE)",
    "active_runs": "Unfinished runs held in memory (primary)",
    "active_workers": "Worker machines holding an active task (primary)",
    "job_queue_depth": "Background job runs waiting for a job thread",
    "primary_lease_held": "1 while this primary holds its lease and serves workers (primary)",
    "overload_shedding": "1 while worker calls are turned away: the event loop lags (overload)",
    "loop_lag_worst_seconds": "The event loop's largest lateness since the process started",
}


def threadpool_gauges() -> dict[str, float]:
    """[LOOP] anyio's limiter belongs to the event loop: read there."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    return {
        "threadpool_threads_busy": limiter.borrowed_tokens,
        "threadpool_threads_limit": limiter.total_tokens,
    }


def route_label(scope: Scope) -> str:
    """The route's template: a bounded set of labels, whatever paths clients send."""
    route = scope.get("route")
    if isinstance(route, Route):
        return route.path
    if isinstance(route, Mount):
        return f"{route.path}/*"
    return "unrouted"


def address_allowed(address: str, allowed: Sequence[Network]) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return any(parsed in network for network in allowed)
