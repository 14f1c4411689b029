"""What a person at the terminal sees, and the log file that keeps the details.

The status line (run, games played and left of the task, W/L/D, Elo
estimate, the run's LLR, nps)
is redrawn in place on a terminal; when output is not a terminal it is
printed as a line at each report instead. Log messages of INFO and above go
to the console (above the status line) and everything to `worker.log` in
the data directory. The status line is shared by threads; a lock keeps
lines whole.
"""

import logging
import logging.handlers
import sys
import threading
from pathlib import Path
from typing import TextIO

from arbiter.protocol.messages import Stats
from arbiter.stats.elo import fixed_games_elo

LOG_NAME = "worker.log"
LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 3


class StatusLine:
    def __init__(self, stream: TextIO | None = None, interactive: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self._lock = threading.RLock()  # re-entered if a log line is written mid-update
        self._text = ""

    def show(self, text: str, *, milestone: bool = False) -> None:
        """Redraw the line (terminal), or print it when it marks a milestone."""
        with self._lock:
            self._text = text
            if self.interactive:
                self.stream.write("\r\x1b[2K" + text)
                self.stream.flush()
            elif milestone:
                self.stream.write(text + "\n")
                self.stream.flush()

    def write_above(self, line: str) -> None:
        """A log line: printed above the status line, which is then redrawn."""
        with self._lock:
            if self.interactive:
                self.stream.write("\r\x1b[2K" + line + "\n" + self._text)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def done(self) -> None:
        with self._lock:
            if self.interactive and self._text:
                self.stream.write("\n")
                self.stream.flush()
            self._text = ""


def task_status(
    run_id: str,
    label: str,
    *,
    played: int,
    total: int,
    stats: Stats,
    nps: float,
    sprt_llr: tuple[float, float, float] | None = None,
) -> str:
    """`run 6543ab12 patch vs master | games 34/200, 166 left | W 20 L 5 D 9 |
    Elo +45.2 ±30.1 | LLR 1.20 [-2.94, 2.94] | 1.02 Mnps`."""
    parts = [
        f"run {run_id[-8:]} {label}",
        f"games {played}/{total}, {max(0, total - played)} left",
        f"W {stats.wins} L {stats.losses} D {stats.draws}",
        elo_text(stats.pentanomial),
    ]
    if sprt_llr is not None:
        parts.append(llr_text(sprt_llr))
    if nps:
        parts.append(f"{nps / 1e6:.2f} Mnps")
    return " | ".join(parts)


def llr_text(sprt_llr: tuple[float, float, float]) -> str:
    """The run's LLR (as of the last report, or when the task was given), with its bounds."""
    llr, lower, upper = sprt_llr
    return f"LLR {llr:.2f} [{lower:.2f}, {upper:.2f}]"


def elo_text(pentanomial: list[int]) -> str:
    if sum(pentanomial) == 0:
        return "Elo -"
    try:
        estimate = fixed_games_elo(pentanomial)
    except (ValueError, ZeroDivisionError):
        return "Elo -"
    return f"Elo {estimate.elo:+.1f} ±{estimate.elo95:.1f}"


class _ConsoleHandler(logging.Handler):
    def __init__(self, status: StatusLine) -> None:
        super().__init__(logging.INFO)
        self.status = status

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.status.write_above(self.format(record))
        except Exception:
            self.handleError(record)


def setup_logging(data_dir: Path, status: StatusLine) -> None:
    """Log file at DEBUG-level detail; the console gets INFO and up, without
    the per-request API lines (those are for the file)."""
    logger = logging.getLogger("arbiter.worker")
    logger.setLevel(logging.INFO)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    data_dir.mkdir(parents=True, exist_ok=True)
    file_handler = logging.handlers.RotatingFileHandler(
        data_dir / LOG_NAME, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
    )
    file_handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s")
    )
    console = _ConsoleHandler(status)
    console.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    console.addFilter(
        lambda record: record.name != "arbiter.worker.api" or record.levelno >= logging.WARNING
    )
    logger.addHandler(file_handler)
    logger.addHandler(console)
    logger.propagate = False
