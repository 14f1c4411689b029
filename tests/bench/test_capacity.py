"""The in-process scheduler benchmark as a correctness check (not a timing one):
every call hands out a task, with durable and with fsync-free commits. The full
benchmark is `bench/capacity.py scheduler` (docs/benchmarks.md)."""

import argparse
from pathlib import Path

from bench import capacity


def test_scheduler_benchmark_hands_out_a_task_per_call(tmp_path: Path) -> None:
    args = argparse.Namespace(runs=3, calls=20)
    for durable in (True, False):
        figures = capacity.scheduler_calls(tmp_path / str(durable), args, durable=durable)
        assert figures["wall_us"] > 0
        assert figures["cpu_us"] > 0
