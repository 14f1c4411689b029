"""The host's busy seconds and the slow replies sent in them (bench/lib/host_noise.py)."""

from bench.lib.host_noise import ANSWERED, TOO_BUSY, StealSample, Timeline, describe

GOALS = {"/api/beat": 10.0, "/api/update_task": 20.0}


def timeline(
    samples: list[StealSample],
    window: int,
    *,
    latencies: dict[str, list[float]] | None = None,
    seconds: dict[str, list[int]] | None = None,
    events: dict[tuple[str, int], int] | None = None,
) -> Timeline:
    return Timeline(latencies or {}, seconds or {}, events or {}, samples, window)


def test_a_second_is_busy_when_a_sample_over_the_threshold_overlaps_it() -> None:
    samples = [
        StealSample(-0.5, 0.6, 0.02, 0.01),  # quiet
        StealSample(0.6, 1.7, 0.30, 0.00),  # the server's core: seconds 0 and 1
        StealSample(1.7, 2.8, 0.05, 0.12),  # the load generator's: seconds 1 and 2
        StealSample(2.8, 3.9, 0.10, 0.10),  # at the threshold, not over it
        StealSample(8.5, 10.4, 0.50, 0.50),  # clipped to the window
    ]
    assert timeline(samples, 10).busy_seconds() == {0, 1, 2, 8, 9}


def test_slow_and_too_busy_replies_are_counted_by_whether_their_second_was_busy() -> None:
    samples = [StealSample(0.0, 1.0, 0.40, 0.0), StealSample(1.0, 3.0, 0.0, 0.0)]
    latencies = {
        "/api/update_task": [0.050, 0.030, 0.005, 0.025, 0.004],
        "/api/beat": [0.001, 0.002],
    }
    seconds = {"/api/update_task": [0, 0, 1, 2, 2], "/api/beat": [0, 1]}
    events = {(TOO_BUSY, 0): 3, (ANSWERED, 0): 7, (TOO_BUSY, 2): 1, (ANSWERED, 1): 99}
    window = timeline(samples, 3, latencies=latencies, seconds=seconds, events=events)
    assert describe(window, GOALS) == (
        "- The host's busy seconds (it took over 10% of either core): 1 of 3."
        ' Sent in them: replies over their goal beat 0 of 0, update_task 2 of 3; "too busy" 3 of 4.'
        " Over the other seconds (a diagnostic, not the result):"
        ' p99 beat 2.00 ms, update_task 25.00 ms; "too busy" 1.000%.'
    )


def test_a_run_without_samples_says_so() -> None:
    assert describe(timeline([], 3), GOALS) == "- The host's busy seconds: not sampled."
