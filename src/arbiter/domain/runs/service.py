"""The runs service as the web layer sees it: one object built at start-up."""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from arbiter.domain.files.books import AnyBook, BookIndex
from arbiter.domain.runs.admission import AdmissionGate
from arbiter.domain.runs.approval import ApprovalPolicy
from arbiter.domain.runs.code_args import CodeSource, local_code_source
from arbiter.domain.runs.contributors import Contributors
from arbiter.domain.runs.ingest import ResultIngest
from arbiter.domain.runs.lifecycle import RunLifecycle, restore
from arbiter.domain.runs.maintenance import (
    refresh_rates,
    scavenge_dead_tasks,
    take_back_task_of,
)
from arbiter.domain.runs.queries import RunQueries
from arbiter.domain.runs.registry import Registry, RunContext
from arbiter.domain.runs.scheduler import TaskScheduler
from arbiter.domain.runs.update_batches import UpdateBatches
from arbiter.domain.workers import BlockedMachines
from arbiter.storage import Storage

log = logging.getLogger("arbiter.runs")


@dataclass(frozen=True, slots=True)
class RunsLoad:
    active_runs: int  # unfinished runs in memory (0 on a secondary)
    active_workers: int  # machines holding an active task
    gate_held: int  # places of the request_task admission gate held


class Runs:
    def __init__(
        self,
        storage: Storage,
        *,
        task_gate: threading.Semaphore | AdmissionGate,
        clock: Callable[[], float] = time.time,
        code: CodeSource | None = None,
        books: BookIndex | None = None,
        approval: ApprovalPolicy | None = None,
    ) -> None:
        """`code`: how submissions read their commits; the server builds it from
        its settings (`runtime/bootstrap.code_source`), tools and tests get one for
        local repositories."""
        books = books or AnyBook()
        self.code = code or local_code_source()
        if isinstance(task_gate, threading.Semaphore):  # tests and tools: no cap per account
            task_gate = AdmissionGate(task_gate, per_account=None)
        self.context = RunContext(storage, Registry(clock), clock)
        self.lifecycle = RunLifecycle(self.context, self.code, books, approval)
        self.blocked_machines = BlockedMachines(storage)
        self.scheduler = TaskScheduler(self.context, task_gate, self.blocked_machines, books)
        self.ingest = ResultIngest(self.context)
        self.updates = UpdateBatches(self.ingest, self.context)
        self.queries = RunQueries(self.context)
        self.contributors = Contributors(self.context)

    def close(self) -> None:
        """End the batch threads once what is queued is answered: they hold a
        database connection each, to be returned before the engine is disposed."""
        self.scheduler.close()
        self.updates.close()

    def restore(self) -> int:
        """Primary start-up: load and verify live runs (threadpool). Their itp is
        worked out afresh at once, as the reference does after loading its runs,
        rather than ranking by values saved under other code for a minute."""
        live = restore(self.context, log.warning)
        refresh_rates(self.context)
        return live

    def load(self) -> RunsLoad:
        """What monitoring shows of the live run state; memory only, no I/O."""
        runs, workers = self.context.registry.counts()
        return RunsLoad(
            active_runs=runs, active_workers=workers, gate_held=self.scheduler.gate_occupied()
        )

    def scavenge(self) -> int:
        return scavenge_dead_tasks(self.context)

    def refresh_rates(self) -> int:
        return refresh_rates(self.context)

    def take_back_task_of(self, short_name: str, message: str) -> int:
        return take_back_task_of(self.context, short_name, message)

    def cpu_hours(self, username: str) -> float:
        """CPU hours this user's workers gave: games × threads × game length."""
        return self.contributors.cpu_hours(username)
