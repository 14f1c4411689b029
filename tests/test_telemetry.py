"""Process-wide measurements (arbiter/telemetry.py): the collector's pauses."""

import gc

from arbiter.telemetry import GC_PAUSE_SECONDS, time_collector_pauses


def collections_counted(generation: int) -> float:
    for metric in GC_PAUSE_SECONDS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels["generation"] == str(generation):
                return sample.value
    return 0.0


def test_each_collection_is_timed_by_its_oldest_generation() -> None:
    time_collector_pauses()
    registered = len(gc.callbacks)
    time_collector_pauses()  # once only: a second timer would count each pause twice
    assert len(gc.callbacks) == registered
    before = [collections_counted(g) for g in range(3)]
    gc.collect(0)
    gc.collect(1)
    gc.collect(1)
    gc.collect(2)
    after = [collections_counted(g) for g in range(3)]
    # Other collections may start on their own meanwhile, never fewer.
    assert after[0] - before[0] >= 1
    assert after[1] - before[1] >= 2
    assert after[2] - before[2] >= 1
