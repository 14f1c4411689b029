"""A short history benchmark (bench/history.py): a small history built as an
import builds one, served by a real server; every page it measures answers."""

from pathlib import Path

from bench.history import Size, prepare, report, serve_and_measure


def test_a_small_history_is_built_and_every_page_answers(tmp_path: Path, database_url: str) -> None:
    size = Size(runs=60, tasks=6_000, actions=200)
    ids, _ = prepare(tmp_path, database_url, size)
    start_up, figures = serve_and_measure(tmp_path, database_url, ids, count=1, pin=False)
    assert start_up > 0
    assert "run page, 5,000 tasks" in figures
    assert all(page.cpu_ms >= 0 for page in figures.values())
    lines = report(size, "SQLite", 1.0, {"small": (1.0, figures), "big": (1.0, figures)}, 1)
    assert "| contributors |" in lines
