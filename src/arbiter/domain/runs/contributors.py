"""Who gave the fleet its games: the contributors table, all time and the last 30 days.

Per user: games their workers played, CPU hours (games × threads × estimated
game length of each run), tests they submitted, and when a worker of theirs
last reported. Built from one grouped query over tasks; the tables are cached
for CACHE_SECONDS because every visitor sees the same numbers.
Runs in the threadpool.
"""

import threading
from dataclasses import dataclass

from arbiter.domain.run_args import parse_time_control
from arbiter.domain.runs.registry import RunContext
from arbiter.storage.base import TaskContribution

CACHE_SECONDS = 60.0
MONTH_SECONDS = 30 * 86400.0


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


HOURS_PER_YEAR = 8766.0  # 365.25 days


@dataclass(frozen=True, slots=True)
class Summary:
    """The contributors page's cards: people who played, people who submitted,
    and what the fleet gave (over the same period as the table)."""

    testers: int
    developers: int
    cpu_years: float
    games: int
    tests: int


class Contributors:
    def __init__(self, context: RunContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._cache: dict[bool, tuple[float, list[Contributor], Summary]] = {}

    def table(self, *, last_month: bool = False) -> list[Contributor]:
        """Contributors by CPU hours, largest first."""
        return self._cached(last_month)[0]

    def summary(self, *, last_month: bool = False) -> Summary:
        return self._cached(last_month)[1]

    def _cached(self, last_month: bool) -> tuple[list[Contributor], Summary]:
        now = self._context.clock()
        with self._lock:
            cached = self._cache.get(last_month)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        built, summary = self._build(now - MONTH_SECONDS if last_month else None)
        with self._lock:
            self._cache[last_month] = (now, built, summary)
        return built, summary

    def _build(self, since: float | None) -> tuple[list[Contributor], Summary]:
        with self._context.storage.read() as tx:
            rows = tx.tasks.contributions(since=since)
            tests = tx.runs.count_by_user(since=since)
            runs = tx.runs.get_many(sorted({row.run_id for row in rows}))
        seconds_per_game = {
            run.id: int(run.args["threads"]) * parse_time_control(run.args["tc"]).game_duration()
            for run in runs
        }
        table = _summarise(rows, seconds_per_game, tests)
        summary = Summary(
            testers=sum(1 for c in table if c.games > 0),
            developers=sum(1 for count in tests.values() if count > 0),
            cpu_years=sum(c.cpu_hours for c in table) / HOURS_PER_YEAR,
            games=sum(c.games for c in table),
            tests=sum(tests.values()),
        )
        return table, summary


def _summarise(
    rows: list[TaskContribution], seconds_per_game: dict[str, float], tests: dict[str, int]
) -> list[Contributor]:
    games: dict[str, int] = {}
    seconds: dict[str, float] = {}
    last: dict[str, float] = {}
    for row in rows:
        games[row.username] = games.get(row.username, 0) + row.games
        cost = seconds_per_game.get(row.run_id, 0.0) * row.games
        seconds[row.username] = seconds.get(row.username, 0.0) + cost
        last[row.username] = max(last.get(row.username, 0.0), row.last_updated)
    table = [
        Contributor(name, games[name], seconds[name] / 3600.0, tests.get(name, 0), last[name])
        for name in games
    ]
    return sorted(table, key=lambda c: (-c.cpu_hours, -c.games, c.username))
