"""Long reads take turns and work at most half of the time: never two at once,
and after each slice of work none works for as long (storage/half_time.py).
The bounds checked are ones sleeping guarantees, whatever the machine's load."""

import threading
import time

from arbiter.storage.half_time import WORK_SLICE, current, half_time, tick


def spin(seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


def test_long_reads_take_turns_and_rest_as_long_as_they_worked() -> None:
    busy: list[tuple[float, float]] = []
    working = [0]
    overlaps = []
    guard = threading.Lock()

    def long_read() -> None:
        with half_time():
            for _ in range(40):
                with guard:
                    working[0] += 1
                    overlaps.append(working[0])
                begin = time.monotonic()
                spin(WORK_SLICE / 4)
                end = time.monotonic()
                with guard:
                    working[0] -= 1
                    busy.append((begin, end))
                tick()

    threads = [threading.Thread(target=long_read) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)  # a hang guard
    assert max(overlaps) == 1  # one works at a time
    worked = sum(end - begin for begin, end in busy)
    span = max(end for _, end in busy) - min(begin for begin, _ in busy)
    # Every slice but the last of all is followed by a rest as long as it.
    assert span >= 2 * worked - 2 * WORK_SLICE


def test_outside_a_long_read_nothing_is_paced() -> None:
    assert current() is None
    tick()  # nothing to pace: returns at once
    with half_time() as outer, half_time() as inner:
        assert outer is inner is current()
    assert current() is None
