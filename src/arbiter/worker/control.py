"""Flags shared by the main thread, the signal handlers and the heartbeat thread.

`stopping` means the worker is to exit (a signal): the current task reports
what it has and is closed with failed_task. `task_abort` means the current
task must end now, because the worker is stopping or the server let the task
go; it is cleared when the next task starts. Events, so every thread can
wait on them.
"""

import threading


class Control:
    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.task_abort = threading.Event()
        self.reason = ""
        self._lock = threading.Lock()
        self._current: tuple[str, int] | None = None

    @property
    def current(self) -> tuple[str, int] | None:
        """(run_id, task_id) of the task being played, for the heartbeat."""
        with self._lock:
            return self._current

    def request_stop(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.stopping.set()
        self.task_abort.set()

    def start_task(self, run_id: str, task_id: int) -> None:
        with self._lock:
            self._current = (run_id, task_id)
            if not self.stopping.is_set():
                self.task_abort.clear()

    def end_task(self) -> None:
        with self._lock:
            self._current = None

    def abort_task(self, run_id: str, task_id: int) -> bool:
        """End the task if it is still the current one (a late beat reply
        must not abort the next task); whether it was."""
        with self._lock:
            if self._current != (run_id, task_id):
                return False
            self.task_abort.set()
            return True

    def wait(self, seconds: float) -> bool:
        """Sleep unless stopping; True when the worker is stopping."""
        return self.stopping.wait(seconds)
