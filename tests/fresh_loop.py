"""Running a coroutine from a synchronous test, whatever the test thread holds.

Playwright's sync API (the browser tests' session-wide fixture) keeps the
thread marked as running its event loop between tests, so `asyncio.run` in a
later test of the same worker process fails ("cannot be called from a running
event loop"). A fresh thread has no loop of its own.
"""

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coroutine)` in a thread of its own; its result or exception."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name="fresh-loop")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value
