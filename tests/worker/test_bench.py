"""Bench signatures, speed and the engine's ARCH string."""

from pathlib import Path

import pytest

from arbiter.worker.bench import bench_all, engine_arch, run_bench
from arbiter.worker.errors import WorkerError
from tests.worker.support import STOCKFISH, needs_stockfish

FAKE_BENCH = """#!/bin/sh
if [ "$1" = bench ]; then
  echo "Total time (ms) : 100" >&2
  echo "Nodes searched  : {nodes}" >&2
  echo "Nodes/second    : 1500000" >&2
else
  echo "Compilation settings include:  64bit BMI2 AVX2"
fi
"""


def fake(tmp_path: Path, name: str, nodes: int) -> Path:
    path = tmp_path / name
    path.write_text(FAKE_BENCH.format(nodes=nodes))
    path.chmod(0o755)
    return path


def test_bench_output_is_parsed(tmp_path: Path) -> None:
    first, second = fake(tmp_path, "a", 123456), fake(tmp_path, "b", 654321)
    results = bench_all([first, second], tmp_path)
    assert [(r.nodes, r.nps) for r in results] == [(123456, 1500000.0), (654321, 1500000.0)]
    assert engine_arch(first, tmp_path) == "64bit BMI2 AVX2"


def test_no_bench_output(tmp_path: Path) -> None:
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 1\n")
    silent.chmod(0o755)
    with pytest.raises(WorkerError, match="no node count"):
        run_bench(silent, tmp_path)
    assert engine_arch(silent, tmp_path) == "?"


def test_stockfish_bench_is_deterministic(tmp_path: Path) -> None:
    needs_stockfish()
    result = run_bench(Path(STOCKFISH), tmp_path)
    assert result.nodes > 100_000
    assert result.nps > 0
    assert engine_arch(Path(STOCKFISH), tmp_path) != "?"
