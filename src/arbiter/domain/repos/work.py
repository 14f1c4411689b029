"""The git executor: its own bounded threads, a global and a per-account cap.

Submissions wait on hosts we do not control, so their git work never runs in
the request threadpool: it runs in `GitWork`'s threads (`arbiter-git_N`), and
the web handler awaits the future without holding a thread. Admission is
decided at once, never by waiting: when every thread is busy the caller is told
`GitBusy` (503), when its account already has its share in flight
`TooManyGitReads` (429), both with a Retry-After. A thread is held at most as
long as the git timeouts allow, so a tarpit host costs a few threads for a
bounded time and nothing else.

Half of the threads are kept for accounts with nothing in flight: an
account's second read (and later ones) runs only while the other half has
room. So a few accounts with slow repositories hold at most one thread each
of the kept half, and everyone else's submission finds a thread unless as
many accounts as there are threads are reading at once.

`submit` takes only a mutex never held for I/O: it may be called on the event loop.
"""

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from arbiter.domain.errors import GitBusy, TooManyGitReads

T = TypeVar("T")
KEPT_FOR_OTHERS = (
    "You have a submission reading repositories, and the server is keeping its"
    " other git threads for accounts that have none."
)


class GitWork:
    def __init__(self, threads: int, per_account: int, retry_after: float) -> None:
        if threads <= 0 or per_account <= 0:
            raise ValueError("git threads and the per-account cap must be positive")
        self.threads = threads
        self.per_account = min(per_account, threads)
        # In-flight reads beyond which only an account's first read is admitted.
        self.shared = threads - threads // 2
        self.retry_after = retry_after
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="arbiter-git")
        self._mutex = threading.Lock()
        self._in_flight = 0
        self._by_account: Counter[str] = Counter()

    def submit(self, account: str, work: Callable[[], T]) -> "Future[T]":
        """Run `work` in a git thread, or refuse at once (GitBusy, TooManyGitReads)."""
        key = account.lower()
        with self._mutex:
            held = self._by_account[key]
            if held >= self.per_account:
                raise TooManyGitReads(self.retry_after)
            if self._in_flight >= self.threads:
                raise GitBusy(self.retry_after)
            if held and self._in_flight >= self.shared:
                raise TooManyGitReads(self.retry_after, KEPT_FOR_OTHERS)
            self._in_flight += 1
            self._by_account[key] += 1

        def run() -> T:
            # The place is given back before the caller sees the result, so a
            # caller that submits again at once finds it free.
            try:
                return work()
            finally:
                self._release(key)

        try:
            future = self._executor.submit(run)
        except BaseException:
            self._release(key)
            raise
        future.add_done_callback(lambda done: self._release(key) if done.cancelled() else None)
        return future

    def call(self, account: str, work: Callable[[], T]) -> T:
        """`submit` and wait: for tools and tests that have a thread to block."""
        return self.submit(account, work).result()

    def in_flight(self) -> int:
        with self._mutex:
            return self._in_flight

    def shutdown(self) -> None:
        """Drop queued work (there is none: admission never queues) and let running
        git end on its own timeouts."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _release(self, key: str) -> None:
        with self._mutex:
            self._in_flight -= 1
            self._by_account[key] -= 1
            if self._by_account[key] <= 0:
                del self._by_account[key]
