"""The in-process scheduler benchmark as a correctness check (not a timing one):
every call hands out a task, with durable and with fsync-free commits. The full
benchmark is `bench/capacity.py scheduler` (docs/benchmarks.md)."""

import argparse
from pathlib import Path

from bench import capacity


def test_scheduler_benchmark_hands_out_a_task_per_call(tmp_path: Path) -> None:
    """Each of the 2 x 20 calls stored a task of its own; the durable variant synced
    every assignment (one at a time, nothing to share) and the baseline none."""
    args = argparse.Namespace(runs=3, calls=20)
    durable = capacity.scheduler_calls(tmp_path / "durable", args, durable=True)
    baseline = capacity.scheduler_calls(tmp_path / "baseline", args, durable=False)
    for figures in (durable, baseline):
        assert figures["tasks"] == figures["distinct_tasks"] == 2 * args.calls
        assert figures["wall_us"] > 0
        assert figures["bytes_per_task"] > 0
    assert durable["syncs_per_call"] >= 1.0
    assert baseline["syncs_per_call"] == 0.0
