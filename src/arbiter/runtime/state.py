"""The per-process state the lifespan builds and the handlers use."""

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine

from arbiter.domain.accounts import Accounts
from arbiter.domain.accounts.signup_proof import SignupProofs
from arbiter.domain.actions import Actions
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.files.nets import NetLibrary
from arbiter.domain.files.pgns import PgnArchive
from arbiter.domain.files.worker_package import WorkerPackage
from arbiter.domain.follows import Follows
from arbiter.domain.quarantine import MachineHealth
from arbiter.domain.runs.service import Runs
from arbiter.domain.webhooks import Webhooks
from arbiter.jobs import JobScheduler
from arbiter.runtime.settings import Settings
from arbiter.storage import Storage


@dataclass
class AppState:
    settings: Settings
    engine: Engine
    storage: Storage
    accounts: Accounts
    actions: Actions
    secret_key: str
    runs: Runs
    pgns: PgnArchive
    nets: NetLibrary
    books: BookLibrary
    # The seeds' admission gate in front of the scheduler: request_task acquires
    # it without blocking a thread and answers "too busy" when it is full and no
    # place comes back within 50 ms (domain/runs/admission.py). The scheduler
    # holds the same object.
    task_semaphore: threading.Semaphore
    follows: Follows
    webhooks: Webhooks
    shutting_down: bool = False
    # The background job scheduler: on a primary with jobs enabled, else None.
    jobs: JobScheduler | None = None
    # The worker wheel served for self-update (built at start-up; None in tests
    # that build the state by hand).
    worker_package: WorkerPackage | None = None
    # The machine-health check and its quarantines (none in states built by hand).
    health: MachineHealth | None = None
    # The signup form's proof of work (none asked in states built by hand).
    signup_proofs: SignupProofs = field(default_factory=lambda: SignupProofs("", 0))
    # Whether this process may serve the worker API: a primary's lease (web/lease.py).
    lease_held: Callable[[], bool] = lambda: True
    # [THREAD] Whether the database's mark still names this primary (a read):
    # /readyz asks, so a balancer stops sending to a primary woken after a
    # standby took over before its lease thread has noticed (web/lease.py).
    lease_confirmed: Callable[[], bool] = lambda: True
