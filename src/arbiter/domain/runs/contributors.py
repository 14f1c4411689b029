"""Who gave the fleet its games: the contributors table, all time and the last 30 days.

Per user: games their workers played, CPU hours (games × threads × estimated
game length of each run), tests they submitted, and when a worker of theirs
last reported. The finished runs' part is read from the totals storage keeps
as runs change (contribution_totals.py: a few hundred rows, whatever the
history's size); the live runs' part is added from memory (from storage on a
secondary). Every visitor sees the same numbers, so a table is built once per
CACHE_SECONDS, by one thread while the others wait for it.
Runs in the threadpool.
"""

import threading
from dataclasses import dataclass

from arbiter.domain.runs import contribution_totals
from arbiter.domain.runs.registry import RunContext
from arbiter.storage import Tx
from arbiter.storage.base import Contribution, day_of
from arbiter.storage.records import RunRecord, TaskRecord

CACHE_SECONDS = 60.0
MONTH_DAYS = 30  # the monthly table: the last 30 UTC days, today included
MONTH_SECONDS = MONTH_DAYS * 86400.0
HOURS_PER_YEAR = 8766.0  # 365.25 days


@dataclass(frozen=True, slots=True)
class Contributor:
    username: str
    games: int
    cpu_hours: float
    tests: int
    last_active: float

    @property
    def games_per_hour(self) -> float:
        return self.games / self.cpu_hours if self.cpu_hours > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Summary:
    """The contributors page's cards: people who played, people who submitted,
    and what the fleet gave (over the same period as the table)."""

    testers: int
    developers: int
    cpu_years: float
    games: int
    tests: int


@dataclass(frozen=True, slots=True)
class _Built:
    at: float
    table: list[Contributor]
    summary: Summary


class Contributors:
    def __init__(self, context: RunContext) -> None:
        self._context = context
        self._cache: dict[bool, _Built] = {}
        self._cache_lock = threading.Lock()
        self._build_lock = threading.Lock()  # one build at a time; others wait for it

    def table(self, *, last_month: bool = False) -> list[Contributor]:
        """Contributors by CPU hours, largest first."""
        return self._cached(last_month).table

    def summary(self, *, last_month: bool = False) -> Summary:
        return self._cached(last_month).summary

    def cpu_hours(self, username: str) -> float:
        """CPU hours this user's workers gave, all time (uncached: a worker's
        right to stop a run depends on it)."""
        with self._context.storage.read() as tx:
            stored = tx.contributions.of_user(username)
            live = self._live(tx)
        seconds = stored.cpu_seconds if stored is not None else 0.0
        seconds += sum(c.cpu_seconds for c in live if c.username == username)
        return seconds / 3600.0

    def _cached(self, last_month: bool) -> _Built:
        fresh = self._fresh(last_month)
        if fresh is not None:
            return fresh
        with self._build_lock:
            fresh = self._fresh(last_month)  # built by the thread we waited for
            if fresh is not None:
                return fresh
            built = self._build(last_month)
        with self._cache_lock:
            self._cache[last_month] = built
        return built

    def _fresh(self, last_month: bool) -> _Built | None:
        with self._cache_lock:
            cached = self._cache.get(last_month)
        if cached is not None and self._context.clock() - cached.at < CACHE_SECONDS:
            return cached
        return None

    def _build(self, last_month: bool) -> _Built:
        now = self._context.clock()
        first_day = day_of(now) - MONTH_DAYS + 1 if last_month else None
        with self._context.storage.read() as tx:
            if first_day is None:
                stored = tx.contributions.all_time()
            else:
                stored = tx.contributions.since(first_day)
            # After the stored part: a run that finishes meanwhile is left out
            # for one cache period rather than counted twice.
            live = self._live(tx)
        if first_day is not None:
            live = [c for c in live if c.day >= first_day]
        everyone = _summarise([*stored, *live])
        # The table lists who played or submitted.
        table = [c for c in everyone if c.games > 0 or c.tests > 0]
        # The stamp is the build's end: a slow build is still served from the cache.
        return _Built(self._context.clock(), table, _summary(everyone))

    def _live(self, tx: Tx) -> list[Contribution]:
        """The games of unfinished runs: memory on the primary, `tx` on a secondary."""
        states = self._context.registry.states()
        runs: list[tuple[RunRecord, list[TaskRecord]]]
        if states:
            runs = [(state.run, list(state.tasks)) for state in states]
        else:
            unfinished = tx.runs.unfinished()
            by_run: dict[str, list[TaskRecord]] = {run.id: [] for run in unfinished}
            for task in tx.tasks.for_runs(list(by_run)):
                by_run[task.run_id].append(task)
            runs = [(run, by_run[run.id]) for run in unfinished]
        return contribution_totals.live(runs)


def _summarise(rows: list[Contribution]) -> list[Contributor]:
    games: dict[str, int] = {}
    seconds: dict[str, float] = {}
    tests: dict[str, int] = {}
    last: dict[str, float] = {}
    for row in rows:
        name = row.username
        games[name] = games.get(name, 0) + row.games
        seconds[name] = seconds.get(name, 0.0) + row.cpu_seconds
        tests[name] = tests.get(name, 0) + row.tests
        last[name] = max(last.get(name, 0.0), row.last_active)
    table = [
        Contributor(name, games[name], seconds[name] / 3600.0, tests[name], last[name])
        for name in games
    ]
    return sorted(table, key=lambda c: (-c.cpu_hours, -c.games, c.username))


def _summary(everyone: list[Contributor]) -> Summary:
    return Summary(
        testers=sum(1 for c in everyone if c.games > 0),
        developers=sum(1 for c in everyone if c.tests > 0),
        cpu_years=sum(c.cpu_hours for c in everyone) / HOURS_PER_YEAR,
        games=sum(c.games for c in everyone),
        tests=sum(c.tests for c in everyone),
    )
