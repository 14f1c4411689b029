"""The state file: what a running worker is doing, for `arbiter worker status`.

The worker rewrites `status.json` in its data directory (atomically: a
reader never sees half a file) whenever what it does changes and at every
status-line update. Whether a worker is running is not taken from the file
(a killed worker cannot say it stopped) but from the directory lock: a
worker holds `worker.lock` for as long as its process lives.
"""

import fcntl
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from arbiter import __version__
from arbiter.protocol import WORKER_VERSION

STATE_FILE = "status.json"
LOCK_FILE = "worker.lock"  # held by the running worker (loop.directory_lock)


@dataclass(frozen=True, slots=True)
class TaskProgress:
    run_id: str
    task_id: int
    label: str  # "patch vs master"
    played: int
    total: int
    wins: int
    losses: int
    draws: int
    nps: float
    sprt_llr: tuple[float, float, float] | None  # the run's (LLR, lower, upper) at assignment


class StateFile:
    """Written by the worker's threads (a lock keeps writes whole and ordered)."""

    def __init__(self, data_dir: Path, *, server: str, machine: str) -> None:
        self.path = data_dir / STATE_FILE
        self._lock = threading.Lock()
        self._fixed = {
            "pid": os.getpid(),
            "version": __version__,
            "protocol": WORKER_VERSION,
            "server": server,
            "machine": machine,
            "machine_url": f"{server}/workers/{machine}",
            "started": time.time(),
        }
        self._activity = "starting"
        self._task: TaskProgress | None = None
        self._note = ""

    def activity(self, text: str) -> None:
        """What the worker does now ("asking for work", "waiting 30 s: no task")."""
        with self._lock:
            self._activity = text
            if not text.startswith("playing"):
                self._task = None
            self._write()

    def note(self, text: str) -> None:
        """Something the owner should know until it changes (a failed self-update)."""
        with self._lock:
            self._note = text
            self._write()

    def stopped(self, reason: str) -> None:
        """The worker is about to exit for good: the note says why (the exit
        status alone would not tell the owner)."""
        self.note(f"the worker stopped: {reason}")

    def progress(self, task: TaskProgress) -> None:
        with self._lock:
            self._activity = f"playing task {task.task_id} of run {task.run_id}"
            self._task = task
            self._write()

    def _write(self) -> None:
        document = {
            **self._fixed,
            "activity": self._activity,
            "task": asdict(self._task) if self._task else None,
            "note": self._note,
            "updated": time.time(),
        }
        staging = self.path.with_name(f".{STATE_FILE}.tmp")
        try:
            staging.write_text(json.dumps(document), encoding="utf-8")
            staging.replace(self.path)
        except OSError:
            pass  # the owner's view only: a full disk must not stop the games


def read_state(data_dir: Path) -> dict[str, Any] | None:
    try:
        document = json.loads((data_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def worker_running(data_dir: Path) -> bool:
    """Whether a worker holds the directory lock (taking it briefly when free)."""
    try:
        descriptor = os.open(data_dir / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # closing releases a lock taken here
    return False


def describe(document: dict[str, Any], *, running: bool, now: float) -> list[str]:
    """The lines `arbiter worker status` prints."""
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(document.get("started", 0)))
    state = "running" if running else "not running"
    lines = [
        f"worker {document.get('version')} (protocol {document.get('protocol')}), "
        f"pid {document.get('pid')}: {state}, started {since}",
        f"server {document.get('server')}",
        f"machine {document.get('machine')}: {document.get('machine_url')}",
    ]
    age = now - float(document.get("updated", now))
    prefix = "now" if running else "last"
    lines.append(f"{prefix}: {document.get('activity')} ({age:.0f} s ago)")
    task = document.get("task")
    if isinstance(task, dict):
        lines.append("  " + _task_line(task))
    if document.get("note"):
        lines.append(f"note: {document['note']}")
    return lines


def _task_line(task: dict[str, Any]) -> str:
    played, total = int(task["played"]), int(task["total"])
    parts = [
        f"{task['label']}",
        f"games {played}/{total}, {max(0, total - played)} left",
        f"W {task['wins']} L {task['losses']} D {task['draws']}",
    ]
    sprt_llr = task.get("sprt_llr")
    if isinstance(sprt_llr, list) and len(sprt_llr) == 3:
        llr, lower, upper = (float(value) for value in sprt_llr)
        parts.append(f"run LLR {llr:.2f} [{lower:.2f}, {upper:.2f}]")
    if task.get("nps"):
        parts.append(f"{float(task['nps']) / 1e6:.2f} Mnps")
    return " | ".join(parts)
