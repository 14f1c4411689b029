"""The copy of its worker's `worker_info` a task keeps, shaped for a long life in memory.

A primary holds every live task, tens of thousands at 10,000 workers, and
CPython's collector walks every container it tracks. A dict holding only
strings, numbers and untracked tuples is one it does not track. So the few
sequences in a worker_info (its architecture, Python and compiler versions)
are tuples shared between tasks: a shared tuple of plain values stops being
tracked once it has survived a collection, and from then on the dicts built
with it are never walked (docs/benchmarks.md). Their JSON is the
reference's, arrays as before.

Runs on the scheduling thread (`task_worker_info`); the shared table is only
read and added to, which the GIL keeps whole.
"""

from typing import Any

from arbiter.protocol.messages import WorkerInfo

MAX_SHARED_VALUES = 1024  # distinct tuples kept; a fleet has a handful (versions, archs)

_shared_values: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def task_worker_info(worker: WorkerInfo, remote_addr: str) -> dict[str, Any]:
    """The worker_info a new task stores: what the worker sent, and where from."""
    info = {
        name: _shared(getattr(worker, name))
        for name in worker.__struct_fields__
        if name != "game_nps"  # measured in the task's games: update_task brings it
    }
    info["remote_addr"] = remote_addr
    info["country_code"] = "?"
    return info


def _shared(value: Any) -> Any:
    """The table's equal tuple for a tuple (kept on first sight while there is
    room), any other value as it is."""
    if not isinstance(value, tuple):
        return value
    kept = _shared_values.get(value)
    if kept is not None:
        return kept
    if len(_shared_values) < MAX_SHARED_VALUES:
        _shared_values[value] = value
    return value
