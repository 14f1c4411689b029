"""The CPU time open-ended searches (the event log's query API) may take: a
bucket that fills at `share` seconds a second up to `burst` seconds; each
search spends the time it took, and none starts while the bucket is empty.

A search's work is CPU on the cores the server and its database share with
every honest request: on PostgreSQL a search's backend runs flat out for as
long as the query takes. One search place alone still let a flood of the
worst queries keep a core half busy and tripled honest p99; spending at most
a fifth of a core keeps it within 2x (bench/flood.py). A person's searches,
a few milliseconds each, never find the bucket empty.

Thread-safe; the clock is injectable for tests.
"""

import threading
import time
from collections.abc import Callable

SEARCH_SHARE = 0.2  # seconds of search a second: a fifth of a core
SEARCH_BURST_SECONDS = 2.0  # one search of the longest allowed at once


class SearchTime:
    def __init__(
        self,
        share: float = SEARCH_SHARE,
        burst: float = SEARCH_BURST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._share = share
        self._burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._level = burst
        self._filled_at = clock()

    def wait(self) -> float:
        """Seconds until a search may start (0: now)."""
        with self._lock:
            self._fill()
            return 0.0 if self._level >= 0 else -self._level / self._share

    def spend(self, seconds: float) -> None:
        """A search took `seconds`."""
        with self._lock:
            self._fill()
            self._level -= seconds

    def _fill(self) -> None:
        now = self._clock()
        self._level = min(self._burst, self._level + (now - self._filled_at) * self._share)
        self._filled_at = now
