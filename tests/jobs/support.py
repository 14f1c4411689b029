"""Helpers for job tests (importable; also used by the web isolation test)."""

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.01)
