"""Process-wide measurements taken below the web layer, for `/metrics`.

A leaf module (it imports nothing of ours), so storage and the domain can
record what only they see (how long a commit takes, how many request_task
calls one scheduling batch decided, how long the garbage collector held the
process, why the admission gate refused a call) without knowing about the web layer;
the web layer's overload counter is here too, so that every app built in one
process registers the same one.
The collectors belong to no registry: each app's registry (`web/metrics.py`)
registers them, so every app built in one process (tests build many) shows
the same process-wide figures.
"""

import gc
import time
from typing import Any

from prometheus_client import Counter, Histogram

# A commit: the COMMIT statement, and on SQLite the group fsync when waited for here.
COMMIT_SECONDS = Histogram(
    "arbiter_commit_duration_seconds",
    "Time to commit a write transaction (and make it durable when waited for there)",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=None,
)

# How many request_task calls one decision of the assignment thread took together.
SCHEDULER_BATCH_SIZE = Histogram(
    "arbiter_scheduler_batch_size",
    "request_task calls decided in one batch by the assignment thread",
    buckets=(1, 2, 3, 4, 5, 8, 12, 16, 32, 64),
    registry=None,
)

UPDATE_BATCH_SIZE = Histogram(
    "arbiter_update_batch_size",
    "update_task calls committed in one transaction by the results thread",
    buckets=(1, 2, 3, 4, 5, 8, 12, 16, 32, 64, 128, 256),
    registry=None,
)

# How long each collection of the garbage collector stopped the process (every
# thread: it holds the GIL), by the oldest generation it collected.
GC_PAUSE_SECONDS = Histogram(
    "arbiter_gc_pause_seconds",
    "Time the garbage collector held the process, by the oldest generation collected",
    ["generation"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5),
    registry=None,
)

# request_task calls told "too busy" by the admission gate, by why: the gate was
# full, or the caller's account held its share and none of its places came free
# in time (domain/runs/admission.py). The first says the gate is small for the
# load, the second that one account's calls come in bursts (or flood).
TOO_BUSY = Counter(
    "arbiter_request_task_too_busy",
    'request_task calls refused by the admission gate ("too busy"), by reason',
    ["reason"],
    registry=None,
)
TOO_BUSY_GATE_FULL = TOO_BUSY.labels("gate_full")
TOO_BUSY_ACCOUNT_SHARE = TOO_BUSY.labels("account_share")

# Worker calls turned away at once because the event loop lagged (web/overload.py),
# by the reply: request_task's "too busy", or a 503 for the others. The gauge
# arbiter_overload_shedding shows only the moment of a scrape, and a spell of
# shedding lasts about a second.
SHED_CALLS = Counter(
    "arbiter_overload_shed_calls",
    "Worker calls turned away at once while the event loop lagged, by reply",
    ["reply"],
    registry=None,
)
SHED_TOO_BUSY = SHED_CALLS.labels("too_busy")
SHED_UNAVAILABLE = SHED_CALLS.labels("503")

PROCESS_WIDE = (
    COMMIT_SECONDS,
    SCHEDULER_BATCH_SIZE,
    UPDATE_BATCH_SIZE,
    GC_PAUSE_SECONDS,
    TOO_BUSY,
    SHED_CALLS,
)


class _CollectionTimer:
    """A `gc.callbacks` entry timing each collection into GC_PAUSE_SECONDS.

    It runs in whichever thread's allocation started the collection, holding
    the GIL; collections never overlap, so one start time is enough."""

    def __init__(self) -> None:
        self.by_generation = [GC_PAUSE_SECONDS.labels(str(g)) for g in range(3)]
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        elif self.started:
            self.by_generation[info["generation"]].observe(time.perf_counter() - self.started)
            self.started = 0.0


_collection_timer = _CollectionTimer()


def time_collector_pauses() -> None:
    """Time every collection from now on (once per process; again is a no-op)."""
    if _collection_timer not in gc.callbacks:
        gc.callbacks.append(_collection_timer)
