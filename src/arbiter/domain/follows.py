"""Following runs: a bell on rows and on the run page; one's own new tests are
followed from their submission (`RunLifecycle.submit`). The browser asks which
followed runs finished since it last looked and shows a notification (the
Notification API, in `static/app.js`). Runs in the threadpool."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from arbiter.domain.errors import NotFound
from arbiter.storage import Storage
from arbiter.storage.records import RunRecord

MAX_NOTICES = 20  # finished runs one answer names at most


@dataclass(frozen=True, slots=True)
class Finished:
    run_id: str
    title: str
    at: float
    is_green: bool
    is_yellow: bool


class Follows:
    def __init__(self, storage: Storage, clock: Callable[[], float] = time.time) -> None:
        self._storage = storage
        self._clock = clock

    def change(self, username: str, run_id: str, *, follow: bool) -> None:
        with self._storage.write() as tx:
            run = tx.runs.get(run_id)
            if run is None or run.deleted:
                raise NotFound(f"No run {run_id}.")
            if follow:
                tx.follows.add(username, run_id, self._clock())
            else:
                tx.follows.remove(username, run_id)

    def followed(self, username: str) -> set[str]:
        with self._storage.read() as tx:
            return tx.follows.of_user(username)

    def finished_since(self, username: str, since: float) -> list[Finished]:
        """The user's followed runs that finished after `since`, oldest first."""
        with self._storage.read() as tx:
            found = tx.follows.finished_since(username, since, MAX_NOTICES)
            runs = {run.id: run for run in tx.runs.get_many([run_id for run_id, _ in found])}
        return [_finished(runs[run_id], at) for run_id, at in found if run_id in runs]


def _finished(run: RunRecord, at: float) -> Finished:
    title = f"{run.args.new_tag} vs {run.args.base_tag}"
    return Finished(run.id, title, at, run.is_green, run.is_yellow)
