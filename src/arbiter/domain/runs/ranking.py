"""Which runs a worker may play and in what order (reference 4.3, 4.4): pure
functions of the runs' records and the worker's machine, no locks, no I/O.

These run for every unfinished run on every request_task, so they are
written for speed: checks stop at the first failure, and what never changes
in a run is worked out once (`RunNeeds`).
"""

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from arbiter.domain.runs.documents import hash_mib
from arbiter.domain.runs.registry import RunState
from arbiter.domain.time_control import parse_time_control
from arbiter.protocol.messages import WorkerInfo
from arbiter.protocol.repo_policy import is_github_repository
from arbiter.stats.scheduling import memory_need, task_size
from arbiter.storage.records import RunRecord
from arbiter.storage.run_spec import RunSpec

SPSA_CORE_BUDGET = 200_000.0  # an SPSA run gets at most this / sqrt(#params) cores

# Why a run was not given to a worker that asked (shown by /api/get_run).
NOT_APPROVED = "not approved yet"
TOO_MANY_THREADS = "needs more threads than the worker has cores"
TOO_FEW_THREADS = "uses fewer threads than the worker's min_threads"
NO_GAMES = "all its games are already assigned"
MEMORY = "needs more memory than the worker offers"
ARCH = "arch_filter excludes the worker's arch"
COMPILER = "pinned to another compiler"
SPSA_CAP = "SPSA core cap reached"
BOOK = "its book is not in the official-stockfish/books catalogue, which the official worker needs"
REPOSITORY = (
    "its repository is not on GitHub, the only host the official worker downloads from:"
    " it waits for Arbiter workers"
)
OUTRANKED = "outranked by another run (priority or share of cores)"


@dataclass(frozen=True, slots=True)
class RunNeeds:
    """What a run asks of a worker that never changes while it runs (`/tests/modify`
    cannot touch these), worked out once instead of on every request_task."""

    threads: int
    hash_new: int  # MiB
    hash_base: int
    allowed_archs: Any
    compiler: str
    spsa_cap: float | None
    scheduling_tc: str  # the clock task sizing prices games by (`TimeControl.scheduling_tc`)
    sprt_batch: int | None  # games per SPRT batch: tasks are whole batches
    catalogue_book: bool  # the official worker can fetch the book (book_catalogue)
    github_repository: bool  # the official worker can fetch the engines (repo_policy)

    @classmethod
    def of(cls, spec: RunSpec, catalogue_book: bool = True) -> "RunNeeds":
        spsa, sprt = spec.spsa, spec.sprt
        return cls(
            threads=spec.threads,
            hash_new=hash_mib(spec.new_options),
            hash_base=hash_mib(spec.base_options),
            allowed_archs=spec.allowed_archs,
            compiler=spec.compiler,
            spsa_cap=None
            if spsa is None
            else SPSA_CORE_BUDGET / math.sqrt(max(1, len(spsa["params"]))),
            scheduling_tc=parse_time_control(spec.tc).scheduling_tc(),
            sprt_batch=None if sprt is None else int(sprt["batch_size"]),
            catalogue_book=catalogue_book,
            github_repository=is_github_repository(spec.tests_repo),
        )


def ranked(
    states: list[RunState],
    worker: WorkerInfo,
    previous: str | None,
    pending: Mapping[str, RunRecord],
) -> list[RunState]:
    """Best first: higher priority; then runs without cores; then the run furthest
    below its share (cores relative to itp). A worker's previous run counts its
    cores, which steers it gently elsewhere. Ties keep the registry's order.
    `pending`: runs as decisions not yet committed leave them, by id.

    This is the reference's order (rundb `sync_request_task`, its sort key, and
    `calc_itp` for itp, `maintenance._with_rates` here) except between runs whose
    keys are equal, e.g. new runs of one priority and throughput: the reference
    sorts a set of run ids, so its ties fall in string-hash order, which differs
    from process to process. The registry's order (submission, or load order
    after a restart) is as good a choice and is reproducible."""
    return [states[key[-1]] for key in sorted(_rank_keys(states, worker, previous, pending))]


def best_ranked(
    states: list[RunState],
    worker: WorkerInfo,
    previous: str | None,
    pending: Mapping[str, RunRecord],
) -> RunState | None:
    """`ranked(...)[0]` without sorting the rest (None: no runs)."""
    best = min(_rank_keys(states, worker, previous, pending), default=None)
    return None if best is None else states[best[-1]]


def _rank_keys(
    states: list[RunState],
    worker: WorkerInfo,
    previous: str | None,
    pending: Mapping[str, RunRecord],
) -> Iterator[tuple[float, bool, float, int]]:
    """Sort keys of `ranked`, ending with each run's position in `states`. Written
    for speed: this runs for every unfinished run on every request_task."""
    concurrency = worker.concurrency
    half = concurrency / 2
    for position, state in enumerate(states):
        run = state.run
        if pending:
            run = pending.get(run.id, run)
        spec = run.args
        cores = run.cores + concurrency if run.id == previous else run.cores
        # Half this machine counted as given already: the reference's remedy for
        # granularity, so a machine of many cores goes where they overshoot the
        # share least. A missing itp counts as 100, what a new run starts with.
        share = (cores + half) / max(spec.itp, 1e-9)
        yield (-spec.priority, cores > 0, share, position)


def unsuitable(run: RunRecord, needs: RunNeeds, worker: WorkerInfo) -> str | None:
    """The first reason this run cannot go to this worker (reference 4.4), or None.

    Not applied: the reference's skip, for a worker that says it is near its
    GitHub API limit, of runs it was never given (building them would cost it
    API calls). That needs every run each machine was ever given, which
    Arbiter does not keep; its own workers never make that claim."""
    if not run.approved:
        return NOT_APPROVED
    mismatch = _mismatch(needs, worker) or _cannot_fetch(needs, worker)
    if mismatch is not None:
        return mismatch
    if run.args.num_games - run.committed_games <= 0:
        return NO_GAMES
    if needs.spsa_cap is not None and run.cores > needs.spsa_cap:
        return SPSA_CAP
    return None


def _mismatch(needs: RunNeeds, worker: WorkerInfo) -> str | None:
    """Why this worker's machine can never play this run, or None."""
    if needs.threads > worker.concurrency:
        return TOO_MANY_THREADS
    if needs.threads < worker.min_threads:
        return TOO_FEW_THREADS
    hashes = needs.hash_new, needs.hash_base
    if memory_need(needs.threads, *hashes, worker.concurrency) > worker.max_memory:
        return MEMORY
    if needs.allowed_archs is not None and worker.worker_arch not in needs.allowed_archs:
        return ARCH
    if needs.compiler and needs.compiler != worker.compiler:
        return COMPILER
    return None


def _cannot_fetch(needs: RunNeeds, worker: WorkerInfo) -> str | None:
    """What of this run the worker cannot download, or None: the official worker
    (no `hosted_books`) fetches books from the catalogue and engines from GitHub."""
    if worker.hosted_books:
        return None
    if not needs.catalogue_book:
        return BOOK
    if not needs.github_repository:
        return REPOSITORY
    return None


def task_games(run: RunRecord, needs: RunNeeds, worker: WorkerInfo) -> int:
    """How many games a new task of `run` for this worker gets (0: none left)."""
    remaining = run.args.num_games - run.committed_games
    if remaining <= 0:
        return 0
    tc, threads = needs.scheduling_tc, needs.threads
    return task_size(tc, threads, worker.concurrency, remaining, needs.sprt_batch)
