"""The status line and the log setup."""

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from arbiter.protocol.messages import Stats
from arbiter.worker.status import StatusLine, elo_text, setup_logging, task_status


def test_task_status_line() -> None:
    stats = Stats(20, 5, 9, 0, 0, [1, 2, 4, 5, 5])
    text = task_status("6543210fedcba98712345678", "patch vs master", played=34, total=200,
                       stats=stats, nps=1_020_000.0)  # fmt: skip
    assert text.startswith(
        "run 12345678 patch vs master | games 34/200, 166 left | W 20 L 5 D 9 | Elo +"
    )
    assert text.endswith("| 1.02 Mnps")
    with_llr = task_status("6543210fedcba98712345678", "patch vs master", played=34, total=200,
                           stats=stats, nps=1_020_000.0, sprt_llr=(1.234, -2.94, 2.94))  # fmt: skip
    assert "| LLR 1.23 [-2.94, 2.94] | 1.02 Mnps" in with_llr
    assert elo_text([0, 0, 0, 0, 0]) == "Elo -"


def test_not_a_terminal_prints_milestones_only() -> None:
    stream = io.StringIO()
    status = StatusLine(stream, interactive=False)
    status.show("a")
    status.show("b", milestone=True)
    status.write_above("log line")
    status.done()
    assert stream.getvalue() == "b\nlog line\n"


def test_a_terminal_redraws_in_place() -> None:
    stream = io.StringIO()
    status = StatusLine(stream, interactive=True)
    status.show("games 2/10")
    status.write_above("built")
    status.done()
    assert stream.getvalue() == "\r\x1b[2Kgames 2/10\r\x1b[2Kbuilt\ngames 2/10\n"


@pytest.fixture
def worker_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("arbiter.worker")
    yield logger
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.propagate = True


def test_logging_to_file_and_console(tmp_path: Path, worker_logger: logging.Logger) -> None:
    stream = io.StringIO()
    setup_logging(tmp_path, StatusLine(stream, interactive=False))
    logging.getLogger("arbiter.worker.task").info("task started")
    logging.getLogger("arbiter.worker.api").info("/api/beat: HTTP 200")
    for handler in worker_logger.handlers:
        handler.flush()
    log_text = (tmp_path / "worker.log").read_text()
    assert "task started" in log_text
    assert "/api/beat" in log_text
    assert "task started" in stream.getvalue()
    assert "/api/beat" not in stream.getvalue()  # API chatter stays in the file
