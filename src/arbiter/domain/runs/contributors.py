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


class Contributors:
    def __init__(self, context: RunContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._cache: dict[bool, tuple[float, list[Contributor]]] = {}

    def table(self, *, last_month: bool = False) -> list[Contributor]:
        """Contributors by CPU hours, largest first."""
        now = self._context.clock()
        with self._lock:
            cached = self._cache.get(last_month)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        built = self._build(now - MONTH_SECONDS if last_month else None)
        with self._lock:
            self._cache[last_month] = (now, built)
        return built

    def _build(self, since: float | None) -> list[Contributor]:
        with self._context.storage.read() as tx:
            rows = tx.tasks.contributions(since=since)
            tests = tx.runs.count_by_user(since=since)
            runs = tx.runs.get_many(sorted({row.run_id for row in rows}))
        seconds_per_game = {
            run.id: int(run.args["threads"]) * parse_time_control(run.args["tc"]).game_duration()
            for run in runs
        }
        return _summarise(rows, seconds_per_game, tests)


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
