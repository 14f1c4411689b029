"""Download counters kept in memory and written to storage in batches.

A download is a read: counting it with a database write per request let an
anonymous download flood queue behind (and slow) the worker API's commits.
`count` only adds to a dictionary under a mutex held for no I/O; `flush`
(the `flush_download_counts` job, and shutdown) writes every pending count in
one transaction. A count is lost only if the process dies without a clean
stop between two flushes.
"""

import threading
from collections import Counter
from collections.abc import Callable, Mapping

# Writes {name: downloads to add} in one transaction; raises if nothing was written.
CountWriter = Callable[[Mapping[str, int]], None]


class DownloadCounts:
    """Thread-safe: `count` from request threads, `flush` from the job executor."""

    def __init__(self, write: CountWriter) -> None:
        self._write = write
        self._pending: Counter[str] = Counter()
        self._mutex = threading.Lock()

    def count(self, name: str) -> None:
        """One download of `name`; memory only, no I/O. [any thread]"""
        with self._mutex:
            self._pending[name] += 1

    def pending(self, name: str) -> int:
        """Downloads of `name` not yet written to storage."""
        with self._mutex:
            return self._pending.get(name, 0)

    def flush(self) -> int:
        """Write the pending counts in one transaction; returns how many downloads
        were written. On a failure they are put back for the next flush. [JOB]"""
        with self._mutex:
            taken, self._pending = self._pending, Counter()
        if not taken:
            return 0
        try:
            self._write(taken)
        except BaseException:
            with self._mutex:
                self._pending.update(taken)
            raise
        return sum(taken.values())
