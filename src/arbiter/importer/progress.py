"""A progress bar on stderr: redrawn in place on a terminal, a line now and then
otherwise (a log file gets a few lines, not thousands)."""

import sys
import time
from typing import TextIO

_WIDTH = 30


class Progress:
    def __init__(self, stream: TextIO | None = None, *, interval: float | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._interval = interval if interval is not None else (0.2 if self._tty else 10.0)
        self._label, self._total, self._started, self._shown = "", 0, 0.0, 0.0

    def start(self, label: str, total_bytes: int) -> None:
        self._label, self._total = label, max(total_bytes, 1)
        self._started = self._shown = time.monotonic()

    def update(self, done_bytes: int, documents: int) -> None:
        now = time.monotonic()
        if now - self._shown >= self._interval:
            self._shown = now
            self._draw(done_bytes, documents, now, final=False)

    def finish(self, documents: int) -> None:
        self._draw(self._total, documents, time.monotonic(), final=True)

    def _draw(self, done: int, documents: int, now: float, *, final: bool) -> None:
        share = min(done / self._total, 1.0)
        bar = "#" * int(share * _WIDTH)
        rate = documents / max(now - self._started, 1e-9)
        line = (
            f"{self._label:<9} [{bar:<{_WIDTH}}] {share:6.1%} {documents:>10,} docs {rate:9,.0f}/s"
        )
        if self._tty:
            self._stream.write("\r" + line + ("\n" if final else ""))
        else:
            self._stream.write(line + "\n")
        self._stream.flush()
