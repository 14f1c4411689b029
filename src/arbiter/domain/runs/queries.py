"""Read-only views of runs and tasks for the API (reference 1.3), with explanations.

Unfinished runs are answered from memory on the primary; everything else, and
every read on a secondary, comes from storage. Runs in the threadpool.
"""

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from arbiter.domain.errors import NotFound
from arbiter.domain.runs import bad_tasks, chi2_summaries, code_view, task_table
from arbiter.domain.runs.code_view import CodeView
from arbiter.domain.runs.documents import run_view, task_view
from arbiter.domain.runs.outcome import sprt_elo_of
from arbiter.domain.runs.ranking import NO_GAMES, NOT_APPROVED
from arbiter.domain.runs.registry import RunContext, RunState
from arbiter.domain.runs.task_table import TaskQuery, TaskSlice
from arbiter.domain.time_control import parse_time_control
from arbiter.stats.purge import Chi2Result, aggregate_rows, chi2_residuals, worker_row
from arbiter.stats.sprt_forecast import sprt_forecast
from arbiter.storage import Tx
from arbiter.storage.base import FinishedRunFilter
from arbiter.storage.records import RunRecord, TaskRecord

FINISHED_PAGE_SIZE = 50
CACHED_CHI2 = 1_000  # runs whose χ² summary is kept while their results stay the same
LIVE_CHI2_SECONDS = 5.0  # a live run's χ² is at most this old on its page
# A filtered list is counted up to this many runs ("1,000+"): an exact count of a
# search over Fishtest's quarter of a million runs is a scan on every request.
COUNT_BOUND = 1_000
FAILED_DAYS = 7  # the home page lists runs that failed this recently


@dataclass(frozen=True, slots=True)
class FinishedPage:
    """One page of finished runs, the cursors of the pages beside it (None at
    either end), and how many the whole list holds: exact, or at least
    COUNT_BOUND when `total_exact` is False."""

    runs: list[RunRecord]
    total: int
    total_exact: bool = True
    newer: str | None = None
    older: str | None = None


@dataclass(frozen=True, slots=True)
class Overview:
    """What the home page shows: live runs by state, recent finished ones, fleet totals."""

    pending: list[RunRecord]
    paused: list[RunRecord]
    active: list[RunRecord]
    finished: FinishedPage
    workers: int
    cores: int
    nps: float
    games_per_minute: float
    failed: list[RunRecord] = field(default_factory=list)  # failed in the last FAILED_DAYS
    queued_cpu_hours: float = 0.0  # estimated CPU time the approved live runs still need

    @property
    def queue_hours(self) -> float | None:
        """Hours the fleet needs for the queue at its current size (None without cores)."""
        return self.queued_cpu_hours / self.cores if self.cores else None


@dataclass(frozen=True, slots=True)
class RunDetail:
    run: RunRecord
    # A live run's tasks, from memory; None for a stored run, whose page reads
    # one page of them from the database (`task_slice`).
    tasks: list[TaskRecord] | None
    why_no_workers: list[str]
    chi2: Chi2Result  # the workers' homogeneity, bad tasks left out (as purges see it)


def chi2_of(tasks: list[TaskRecord]) -> Chi2Result:
    rows = aggregate_rows(
        (t.worker_name, worker_row(t.wins, t.losses, t.draws, t.pentanomial))
        for t in tasks
        if not t.bad
    )
    return chi2_residuals(rows)


class Chi2Cache:
    """The χ² of the runs viewed last, while each one's results stay as they
    are: a finished run is summed once, not on every view. A live run's moves
    with every result, so its χ² is redone at most every `live_seconds` (a run
    of thousands of workers costs tens of milliseconds to score). Thread-safe."""

    def __init__(
        self,
        size: int = CACHED_CHI2,
        live_seconds: float = LIVE_CHI2_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._size = size
        self._live_seconds = live_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._held: OrderedDict[str, tuple[str, float, Chi2Result]] = OrderedDict()

    def get(self, run: RunRecord, compute: Callable[[], Chi2Result]) -> Chi2Result:
        stamp, now = chi2_summaries.stamp_of(run), self._clock()
        with self._lock:
            held = self._held.get(run.id)
            if held is not None and (
                held[0] == stamp or (not run.finished and now - held[1] < self._live_seconds)
            ):
                self._held.move_to_end(run.id)
                return held[2]
        chi2 = compute()  # outside the lock: two first views may both compute
        with self._lock:
            self._held[run.id] = (stamp, now, chi2)
            self._held.move_to_end(run.id)
            while len(self._held) > self._size:
                self._held.popitem(last=False)
        return chi2


@dataclass(frozen=True, slots=True)
class Machine:
    """A worker at work: its task, the run it plays for, when it was last heard from."""

    task: TaskRecord
    run_title: str
    last_seen: float


class RunQueries:
    def __init__(self, context: RunContext) -> None:
        self._context = context
        self._chi2 = Chi2Cache()

    def code(self, run_id: str) -> CodeView | None:
        """What submission read of the run's commits (diff, subjects, warnings). [THREAD]"""
        with self._context.storage.read() as tx:
            return code_view.load(tx, run_id)

    def active_runs(self) -> dict[str, dict[str, Any]]:
        return {run.id: run_view(run) for run in self._live_runs() if not run.deleted}

    def overview(self) -> Overview:
        """Live runs grouped as the home page shows them, and the newest finished runs."""
        now = self._context.clock()
        with self._context.storage.read() as tx:
            live = [run for run in tx.runs.unfinished() if not run.deleted]
            newest = tx.runs.finished_slice(FinishedRunFilter(limit=FINISHED_PAGE_SIZE))
            total = self._exact_total(tx, FinishedRunFilter()) or 0
            recent = FinishedRunFilter(failed_only=True, since=now - FAILED_DAYS * 86400.0)
            failed = tx.runs.finished(recent)
        memory = {state.run.id: state.run for state in self._context.registry.states()}
        live = [memory.get(run.id, run) for run in live]
        active = [run for run in live if run.approved and run.workers > 0]
        finished = FinishedPage(newest.runs, total, older=newest.older)
        return Overview(
            pending=[run for run in live if not run.approved],
            paused=[run for run in live if run.approved and run.workers == 0],
            active=sorted(active, key=lambda run: -run.cores),
            finished=finished,
            workers=sum(run.workers for run in active),
            cores=sum(run.cores for run in active),
            nps=sum(run.nps for run in active),
            games_per_minute=sum(run.games_per_minute for run in active),
            failed=failed,
            queued_cpu_hours=sum(remaining_cpu_hours(run) for run in live if run.approved),
        )

    def detail(self, run_id: str) -> RunDetail:
        """A run and its workers' χ², for its page: a live run with its tasks
        from memory, a stored one without (`task_slice` reads a page). A deleted
        run is shown too, as the reference shows it (its page says so)."""
        state = self._context.registry.get(run_id)
        if state is not None:
            with state.lock:
                run, tasks = state.run, list(state.tasks)
            chi2 = self._chi2.get(run, lambda: chi2_of(tasks))
            return RunDetail(run, tasks, why_no_workers(run, state), chi2)
        run = self._stored_run(run_id, deleted_too=True)
        storage = self._context.storage
        chi2 = self._chi2.get(run, lambda: chi2_summaries.stored_or_computed(storage, run))
        return RunDetail(run, None, why_no_workers(run, None), chi2)

    def task_slice(self, detail: RunDetail, query: TaskQuery) -> TaskSlice:
        """The page of the run's tasks table that `query` asks for."""
        residual = detail.chi2.residual
        if detail.tasks is not None:
            return task_table.from_memory(detail.tasks, query, residual)
        with self._context.storage.read() as tx:
            return task_table.from_storage(tx, detail.run.id, query, residual)

    def machines(self) -> list[Machine]:
        """Every worker holding an active task, most cores first."""
        registry = self._context.registry
        states = registry.states()
        if states:
            found = []
            for state in states:
                run, tasks = state.run, list(state.tasks)
                for task in tasks:
                    if task.active:
                        seen = registry.lease(task.run_id, task.task_id) or task.last_updated
                        found.append(Machine(task, _title(run), seen))
        else:  # a secondary keeps no registry: read storage
            with self._context.storage.read() as tx:
                tasks = tx.tasks.active()
                runs = {run.id: run for run in tx.runs.get_many(sorted({t.run_id for t in tasks}))}
            found = [
                Machine(task, _title(runs[task.run_id]), task.last_updated)
                for task in tasks
                if task.run_id in runs
            ]
        return sorted(
            found,
            key=lambda m: (-int(m.task.worker_info.get("concurrency", 0)), m.task.worker_name),
        )

    def finished_runs(self, page: int, run_filter: FinishedRunFilter) -> dict[str, dict[str, Any]]:
        """Page `page` (1-based) of finished runs, newest update first."""
        offset = (page - 1) * FINISHED_PAGE_SIZE
        query = FinishedRunFilter(
            username=run_filter.username,
            success_only=run_filter.success_only,
            yellow_only=run_filter.yellow_only,
            ltc_only=run_filter.ltc_only,
            since=run_filter.since,
            offset=offset,
            limit=FINISHED_PAGE_SIZE,
        )
        with self._context.storage.read() as tx:
            runs = tx.runs.finished(query)
        return {run.id: run_view(run) for run in runs}

    def finished_page(self, run_filter: FinishedRunFilter) -> FinishedPage:
        """The page of finished runs `run_filter` selects (its `before` or `after`
        cursor; a cursor this list did not make reads as the first page), with
        the list's total (the finished tests pages)."""
        run_filter = replace(run_filter, limit=FINISHED_PAGE_SIZE)
        with self._context.storage.read() as tx:
            total = self._exact_total(tx, run_filter)
            bound = COUNT_BOUND if total is None else 0
            try:
                found = tx.runs.finished_slice(run_filter, count_up_to=bound)
            except ValueError:
                first_page = replace(run_filter, before="", after="")
                found = tx.runs.finished_slice(first_page, count_up_to=bound)
            if total is None:
                total = found.counted
                if total is None:
                    total = tx.runs.count_finished(run_filter, at_most=COUNT_BOUND)
                exact = total < COUNT_BOUND
            else:
                exact = True
        return FinishedPage(found.runs, total, exact, found.newer, found.older)

    def _exact_total(self, tx: Tx, run_filter: FinishedRunFilter) -> int | None:
        """The finished runs of the whole list or of one owner, from the submission
        totals kept as runs change, less the live runs; None for other filters."""
        plain = replace(run_filter, username=None, before="", after="", limit=0)
        if plain != FinishedRunFilter(limit=0):
            return None
        live = [run for run in self._live_runs(tx) if not run.deleted]
        owner = run_filter.username
        if owner is None:
            return max(0, tx.contributions.tests() - len(live))
        stored = tx.contributions.of_user(owner)
        tests = stored.tests if stored is not None else 0
        return max(0, tests - sum(1 for run in live if run.username == owner))

    def _live_runs(self, tx: Tx | None = None) -> list[RunRecord]:
        """Unfinished runs: memory on the primary; storage on a secondary, which
        keeps no registry (read in `tx` when given)."""
        states = self._context.registry.states()
        if states:
            return [state.run for state in states]
        if tx is not None:
            return tx.runs.unfinished()
        with self._context.storage.read() as own:
            return own.runs.unfinished()

    def live_of(self, username: str) -> list[RunRecord]:
        """A user's unfinished runs (name in any case), oldest first: memory on the
        primary, storage on a secondary."""
        key = username.casefold()
        live = self._live_runs()
        mine = [run for run in live if run.username.casefold() == key and not run.deleted]
        return sorted(mine, key=lambda run: run.start_time)

    def run(self, run_id: str) -> RunRecord:
        """One run, from memory when live (NotFound when missing or deleted)."""
        state = self._context.registry.get(run_id)
        return state.run if state is not None else self._stored_run(run_id)

    def get_run(self, run_id: str) -> dict[str, Any]:
        """The run (tasks left out) and `why_no_workers`: what keeps workers away."""
        state = self._context.registry.get(run_id)
        run = state.run if state is not None else self._stored_run(run_id)
        view = run_view(run)
        view["why_no_workers"] = why_no_workers(run, state)
        return view

    def get_task(self, run_id: str, task_id: int) -> dict[str, Any]:
        state = self._context.registry.get(run_id)
        task: TaskRecord | None
        if state is not None:
            task = state.tasks[task_id] if 0 <= task_id < len(state.tasks) else None
        else:
            with self._context.storage.read() as tx:
                task = tx.tasks.get(run_id, task_id)
        if task is None:
            raise NotFound(f"No task {task_id} in run {run_id}.")
        return task_view(task)

    def get_bad_task(self, run_id: str, index: int) -> dict[str, Any]:
        """The `index`-th task purged from the run, as it was (`/api/get_task/<run>/<n>bad`)."""
        with self._context.storage.read() as tx:
            copy = bad_tasks.get(tx, run_id, index)
        if copy is None:
            raise NotFound(f"No purged task {index} in run {run_id}.")
        return copy

    def get_elo(self, run_id: str) -> dict[str, Any]:
        """The run with its SPRT's Elo estimate; {} for a run without SPRT, as the
        reference answers (an unknown run is still NotFound)."""
        state = self._context.registry.get(run_id)
        run = state.run if state is not None else self._stored_run(run_id)
        if run.args.sprt is None:
            return {}
        view = run_view(run)
        view["why_no_workers"] = why_no_workers(run, state)
        view["elo"] = sprt_estimate(run)
        return view

    def _stored_run(self, run_id: str, *, deleted_too: bool = False) -> RunRecord:
        with self._context.storage.read() as tx:
            run = tx.runs.get(run_id)
        if run is None or (run.deleted and not deleted_too):
            raise NotFound(f"No run {run_id}.")
        return run


def remaining_cpu_hours(run: RunRecord) -> float:
    """CPU hours a live run still needs: its games left × threads × game length.

    An SPRT's games left are estimated as the expected length of a test of an
    Elo-neutral patch (true nElo = elo0) minus what it has played, not its cap.
    """
    spec = run.args
    played = run.wins + run.losses + run.draws
    games = float(spec.num_games)
    sprt = spec.sprt
    if sprt is not None and sprt.get("elo_model") == "normalized":
        forecast = sprt_forecast(
            float(sprt["elo0"]),
            float(sprt["elo1"]),
            float(sprt["elo0"]),
            alpha=float(sprt["alpha"]),
            beta=float(sprt["beta"]),
        )
        games = min(games, forecast.expected_games)
    left = max(0.0, games - played)
    seconds = parse_time_control(spec.tc).game_duration() * spec.threads
    return left * seconds / 3600.0


def _title(run: RunRecord) -> str:
    return f"{run.args.new_tag} vs {run.args.base_tag}"


def sprt_estimate(run: RunRecord) -> dict[str, object]:
    """{a, b, elo, ci, LOS, LLR} of an SPRT run, with games or none (the counts
    are regularized, so a run with none gets Elo 0 and LOS 0.5, as the
    reference answers); {} for a run without SPRT."""
    sprt = run.args.sprt
    if sprt is None:
        return {}
    estimate = sprt_elo_of(run, sprt)
    return {} if estimate is None else estimate.as_dict()


def why_no_workers(run: RunRecord, state: RunState | None) -> list[str]:
    """Plain reasons, most decisive first; empty while the run has workers."""
    states = (
        (run.deleted, "deleted"),
        (run.finished, "finished"),
        (not run.approved, NOT_APPROVED),
        (run.committed_games >= run.args.num_games, NO_GAMES),
    )
    decisive = next((reason for holds, reason in states if holds), None)
    if decisive is not None:
        return [decisive]
    if run.workers > 0:
        return []
    if state is None or not state.refusals:
        return ["no worker has asked for work since it became available"]
    return [
        f"{reason} ({count} request{'s' if count != 1 else ''})"
        for reason, count in state.refusals.most_common()
    ]
