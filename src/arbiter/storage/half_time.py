"""Long reads that leave the CPU to everything else half of the time.

A time-limited read (`Storage.read(time_limit=...)`: the event log's
open-ended searches) can be made to work for its whole limit, and on SQLite,
or in its Python checks, that work is done on the server's own core. So such
reads take turns: one works at a time, for a slice of WORK_SLICE, then none
works for as long as it did, whatever the number of them. The pages and
worker calls beside them therefore always find the CPU free at least half of
the time, and a flood of searches slows its own searches, not them.

`HalfTime.tick()` is called often while working (SQLite's progress handler,
each row the Python checks read); it costs one clock read until a slice is
used up. [THREAD]: it sleeps, in the thread of the read.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

WORK_SLICE = 0.004  # s a long read works before it gives the CPU back for as long

_turn = threading.Lock()  # held by the long read that is working
_free_at = [0.0]  # when the next may work (written under _turn)
_current = threading.local()  # this thread's HalfTime, while its read lasts


class HalfTime:
    def __init__(self) -> None:
        self._started = 0.0

    def take_turn(self) -> None:
        _turn.acquire()
        wait = _free_at[0] - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._started = time.monotonic()

    def tick(self) -> None:
        now = time.monotonic()
        worked = now - self._started
        if worked < WORK_SLICE:
            return
        _free_at[0] = now + worked
        _turn.release()
        self.take_turn()

    def leave(self) -> None:
        _free_at[0] = max(_free_at[0], time.monotonic())
        _turn.release()


@contextmanager
def half_time() -> Iterator[HalfTime]:
    """This thread works half of the time inside the block (nested blocks share it)."""
    running = current()
    if running is not None:
        yield running
        return
    pacer = HalfTime()
    pacer.take_turn()
    _current.pacer = pacer
    try:
        yield pacer
    finally:
        _current.pacer = None
        pacer.leave()


def current() -> HalfTime | None:
    """The HalfTime of this thread's long read, None outside one."""
    pacer: HalfTime | None = getattr(_current, "pacer", None)
    return pacer


def tick() -> None:
    """A look at the clock for this thread's long read, if it is in one."""
    pacer = current()
    if pacer is not None:
        pacer.tick()
