"""The collector's pauses as a fleet report gives them (bench/lib/collector.py)."""

import math

from bench.lib.collector import (
    COMMITS,
    UPDATE_BATCHES,
    Buckets,
    Pauses,
    Snapshot,
    describe,
    describe_app_latency,
    describe_commits,
    describe_too_busy,
    difference,
)


def test_the_window_is_the_difference_of_two_scrapes() -> None:
    start = {"0": Pauses(10, 0.1, 1), "1": Pauses(1, 0.1, 1), "2": Pauses(0, 0.0, 0)}
    end = {"0": Pauses(14, 0.14, 2), "1": Pauses(2, 0.2, 2), "2": Pauses(0, 0.0, 0)}
    window = difference(end, start)
    assert window["0"].count == 4
    assert describe(window) == (
        "- Collector pauses in the window: young 4 (mean 10.0 ms, 1 over 20 ms);"
        " middle 1 (mean 100.0 ms, 1 over 20 ms); full none."
    )


def test_a_server_without_the_metric_says_so() -> None:
    assert describe({}) == "- Collector pauses: not reported by this server."


def test_too_busy_reasons_are_counted_over_the_window() -> None:
    start = Snapshot({}, {"gate_full": 3, "account_share": 10})
    end = Snapshot({}, {"gate_full": 5, "account_share": 10})
    window = (end - start).too_busy
    assert describe_too_busy(window) == (
        " (the server's reasons: the gate full 2, an account past its share 0)"
    )
    assert describe_too_busy({}) == ""  # a server that does not count them


def test_calls_turned_away_while_the_loop_lagged_are_their_own_reason() -> None:
    start = Snapshot({}, {"gate_full": 1, "account_share": 0, "overload": 0, "overload 503": 4})
    end = Snapshot({}, {"gate_full": 1, "account_share": 0, "overload": 3, "overload 503": 40})
    assert describe_too_busy((end - start).too_busy) == (
        " (the server's reasons: the gate full 0, an account past its share 0,"
        " the loop lagging 3; other worker calls turned away with a 503: 36)"
    )


def test_commits_and_update_batches_are_described_over_the_window() -> None:
    commits_start = Buckets({0.005: 10, 0.025: 10, 0.05: 10, math.inf: 10}, 0.02)
    commits_end = Buckets({0.005: 100, 0.025: 108, 0.05: 110, math.inf: 110}, 0.52)
    batches_start = Buckets({1: 0, 4: 0, 8: 0, math.inf: 0}, 0)
    batches_end = Buckets({1: 20, 4: 90, 8: 100, math.inf: 100}, 300)
    start = Snapshot({}, {}, {COMMITS: commits_start, UPDATE_BATCHES: batches_start})
    end = Snapshot({}, {}, {COMMITS: commits_end, UPDATE_BATCHES: batches_end})
    assert describe_commits((end - start).histograms) == (
        "- Commits in the window: 100, mean 5.00 ms, p99 at most 50 ms, 2 over 25 ms;"
        " update_task batches 100, mean 3.0 calls, p99 at most 8."
    )


def test_a_window_without_commits_says_so() -> None:
    assert describe_commits({}) == "- Commits: none reported in the window."


def test_the_apps_own_latency_is_a_bucket_bound_per_worker_call() -> None:
    updates = Buckets({0.01: 980, 0.025: 995, 0.05: 1000, math.inf: 1000}, 5.0)
    beats = Buckets({0.001: 99, 0.0025: 100, math.inf: 100}, 0.05)
    window = {"/api/update_task": updates, "/api/beat": beats}
    assert describe_app_latency(window) == (
        "- The app's own latency (from a call's start in the app to its reply's end;"
        " a bucket bound), p99 at most: update_task 25 ms, beat 1 ms."
    )
    assert describe_app_latency({}) == "- The app's own latency: not reported in the window."
