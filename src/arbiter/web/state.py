"""The per-process state the lifespan builds and the handlers use."""

import threading
from dataclasses import dataclass, field

from sqlalchemy import Engine

from arbiter.domain.accounts import Accounts
from arbiter.domain.actions import Actions
from arbiter.storage import Storage
from arbiter.web.settings import Settings


@dataclass
class AppState:
    settings: Settings
    engine: Engine
    storage: Storage
    accounts: Accounts
    actions: Actions
    secret_key: str
    # The seeds' admission gate in front of the scheduler: request_task acquires
    # it without blocking and answers "too busy" at once when it is full.
    task_semaphore: threading.Semaphore = field(init=False)
    shutting_down: bool = False

    def __post_init__(self) -> None:
        self.task_semaphore = threading.Semaphore(self.settings.task_semaphore_size)
