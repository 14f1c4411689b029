"""The primary's in-memory view of unfinished runs, and the one way to change them.

Every change goes through `RunContext.commit`: it writes the changed rows and
their actions in one transaction and, only once that has committed, swaps the
new values into memory and the indexes. The caller holds the run's lock, so
per run the sequence "read memory, decide, commit, publish" is atomic; runs
do not wait for each other.

All methods run in the threadpool (they block on locks and the database).
"""

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from arbiter.domain import actions
from arbiter.domain.profile_fields import username_key
from arbiter.domain.runs import bad_tasks, contribution_totals
from arbiter.domain.runs.totals import apply_change
from arbiter.storage import Storage, Tx
from arbiter.storage.base import Contribution, NewAction
from arbiter.storage.records import RunRecord, TaskRecord, evolve

# A task silent this long is reclaimed. The official worker signs of life at
# least every 120 s (a beat when no update was sent), so 80 s of slack; with
# the reclaim checked every RECLAIM_CHECK_SECONDS (5% jitter), a vanished
# worker's task is free again within 232 s of its last sign (the reference:
# a 360 s lease checked every 60 s).
LEASE_SECONDS = 200.0
RECLAIM_CHECK_SECONDS = 30.0


@dataclass
class RunState:
    run: RunRecord
    tasks: list[TaskRecord]  # index == task_id
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    # Why workers that asked were not given this run: reason -> count (explainability).
    refusals: Counter[str] = field(default_factory=Counter)


@dataclass
class Change:
    """What one operation changes in one run; committed as a unit."""

    run: RunRecord
    # Existing tasks' new values by task id: a batch folds hundreds of updates of
    # one run into one change, and each looks its task up here.
    saved: dict[int, TaskRecord] = field(default_factory=dict)
    added: list[TaskRecord] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)  # keyword sets for actions.record
    purged: list[dict[str, Any]] = field(default_factory=list)  # copies for bad_tasks.append

    def current(self, task: TaskRecord) -> TaskRecord:
        """The task as this change leaves it so far."""
        return self.saved.get(task.task_id, task)

    def save_task(self, old: TaskRecord, new: TaskRecord) -> None:
        """`old` must be `current(...)` of the task: deltas chain within one change."""
        self.run = apply_change(self.run, old, new)
        self.saved[new.task_id] = new

    def add_task(self, task: TaskRecord) -> None:
        self.run = apply_change(self.run, None, task)
        self.added.append(task)


class Registry:
    """Unfinished runs by id, leases, and indexes over active tasks."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()  # guards the dicts below, never held for I/O
        self._runs: dict[str, RunState] = {}
        self._leases: dict[tuple[str, int], float] = {}
        self._active_by_worker: dict[str, tuple[str, int]] = {}
        self._per_address: Counter[tuple[str, str]] = Counter()
        self._last_run_of_worker: dict[str, str] = {}

    # --- runs ---

    def get(self, run_id: str) -> RunState | None:
        with self._lock:
            return self._runs.get(run_id)

    def states(self) -> list[RunState]:
        with self._lock:
            return list(self._runs.values())

    def counts(self) -> tuple[int, int]:
        """(unfinished runs, machines holding an active task), for monitoring."""
        with self._lock:
            return len(self._runs), len(self._active_by_worker)

    def put(self, state: RunState, *, lease_from: float | None = None) -> None:
        """Track a run; its active tasks get leases from `lease_from` (start-up grace)."""
        start = self._clock() if lease_from is None else lease_from
        with self._lock:
            self._runs[state.run.id] = state
            for task in state.tasks:
                if task.active:
                    self._index(task)
                    self._leases[(task.run_id, task.task_id)] = max(task.last_updated, start)

    def drop(self, run_id: str) -> None:
        with self._lock:
            state = self._runs.pop(run_id, None)
            if state is not None:
                for task in state.tasks:
                    if task.active:
                        self._unindex(task)

    # --- leases and worker indexes ---

    def renew(self, run_id: str, task_id: int) -> None:
        with self._lock:
            if (run_id, task_id) in self._leases:
                self._leases[(run_id, task_id)] = self._clock()

    def lease(self, run_id: str, task_id: int) -> float | None:
        with self._lock:
            return self._leases.get((run_id, task_id))

    def expired(self, now: float) -> list[tuple[str, int]]:
        with self._lock:
            return [key for key, seen in self._leases.items() if now - seen > LEASE_SECONDS]

    def active_task_of(self, short_name: str) -> tuple[str, int] | None:
        with self._lock:
            return self._active_by_worker.get(short_name)

    def tasks_from(self, username: str, remote_addr: str) -> int:
        """Active tasks of the account (any spelling of its name) at this address."""
        with self._lock:
            return self._per_address[(username_key(username), remote_addr)]

    def last_run_of(self, short_name: str) -> str | None:
        with self._lock:
            return self._last_run_of_worker.get(short_name)

    def publish(self, state: RunState, change: Change) -> None:
        """Apply a committed change to memory (caller holds `state.lock`)."""
        with self._lock:
            for task in [*change.saved.values(), *change.added]:
                old = state.tasks[task.task_id] if task.task_id < len(state.tasks) else None
                was_active = old is not None and old.active
                if was_active and not task.active:
                    self._unindex(task)
                elif task.active and not was_active:
                    self._index(task)
                if task.task_id < len(state.tasks):
                    state.tasks[task.task_id] = task
                else:
                    state.tasks.append(task)
            state.run = change.run
            if change.run.finished:
                self._runs.pop(change.run.id, None)
                for task in state.tasks:
                    self._leases.pop((task.run_id, task.task_id), None)

    def _index(self, task: TaskRecord) -> None:
        key = (task.run_id, task.task_id)
        self._active_by_worker[task.worker_name] = key
        self._per_address[(username_key(task.username), task.remote_addr)] += 1
        self._last_run_of_worker[task.worker_name] = task.run_id
        self._leases[key] = self._clock()

    def _unindex(self, task: TaskRecord) -> None:
        key = (task.run_id, task.task_id)
        if self._active_by_worker.get(task.worker_name) == key:
            del self._active_by_worker[task.worker_name]
        per_address = (username_key(task.username), task.remote_addr)
        self._per_address[per_address] -= 1
        if self._per_address[per_address] <= 0:
            del self._per_address[per_address]
        self._leases.pop(key, None)


@dataclass
class RunContext:
    """What the run services share: storage, the registry and the clock."""

    storage: Storage
    registry: Registry
    clock: Callable[[], float] = time.time

    def commit(self, state: RunState, change: Change) -> None:
        """Write `change` durably, then publish it. Caller holds `state.lock`."""
        self.commit_many([(state, change)])

    def commit_many(self, changes: list[tuple[RunState, Change]]) -> None:
        """Write the changes of several runs in one transaction, then publish them
        all. Caller holds the lock of every one of these runs."""
        now = self.clock()
        for _, change in changes:
            change.run = evolve(change.run, last_updated=now)
        with self.storage.write() as tx:
            write_changes(tx, changes)
        for state, change in changes:
            self.registry.publish(state, change)

    @contextmanager
    def locked(self, run_id: str) -> Iterator[RunState | None]:
        """The run, under its lock. Commits made inside become durable after the
        lock is released, so the next change of the run does not wait for the disk."""
        state = self.registry.get(run_id)
        if state is None:
            yield None
            return
        with self.storage.durable_on_exit(), state.lock:
            # The run may have finished (and left the registry) while we waited.
            yield state if self.registry.get(run_id) is state else None


def write_changes(tx: Tx, changes: list[tuple[RunState, Change]]) -> None:
    """Write what each change changes in its run as committed so far (memory holds
    what storage holds: changes are published only once committed). New tasks
    of all the runs go in one statement, and so do runs' rows changed alike."""
    tx.tasks.add_many([task for _, change in changes for task in change.added])
    tx.tasks.save_many(
        [
            (task, state.tasks[task.task_id])
            for state, change in changes
            for task in change.saved.values()
        ]
    )
    tx.runs.save_many([(change.run, state.run) for state, change in changes])
    totals = _contribution_changes(changes)
    if totals:
        tx.contributions.add(totals)
    for _, change in changes:
        if change.purged:
            bad_tasks.append(tx, change.run.id, change.purged)
        for entry in change.log:
            actions.record(tx, NewAction(**entry))


def _contribution_changes(changes: list[tuple[RunState, Change]]) -> list[Contribution]:
    """What the changes change in contributor totals: for a result update of a
    live run, three flags read and nothing else."""
    found: list[Contribution] = []
    for state, change in changes:
        stored, new = state.run, change.run
        if stored.finished or new.finished or stored.deleted != new.deleted:
            new_tasks = [change.current(task) for task in state.tasks] + change.added
            found += contribution_totals.of_change(stored, state.tasks, new, new_tasks)
    return found
