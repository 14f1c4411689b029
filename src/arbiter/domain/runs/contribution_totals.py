"""Contributor totals, kept as runs change so that nobody scans the tasks to read them.

What a user gave is the games their workers played (in finished runs, as the
tasks now hold them: a purge takes its games back) priced at the run's
threads × estimated game length, and the runs they submitted (deleted ones
left out). Storage keeps these per user, all time and per UTC day of each
task's last update (of each run's submission for tests):

- a run counts its tests from the transaction that stores it;
- its games count from the transaction that finishes it (and whatever changes a
  finished run's tasks, a purge or a delete, changes its totals in the same
  transaction); a run re-opened by a modify takes its games back until it
  finishes again;
- live runs' games are added when read (`live`), from the registry's memory.

So a result update of a live run writes nothing more than before, and a
rebuild from the tasks (`rebuild`: after an import, after the upgrade that
created the tables) gives the same totals as live operation. Runs in the
threadpool (or the results thread, inside `write_changes`).
"""

from collections.abc import Iterable, Iterator

from arbiter.domain.errors import ValidationError
from arbiter.domain.time_control import parse_time_control
from arbiter.storage import Storage, Tx
from arbiter.storage.base import Contribution, day_of
from arbiter.storage.records import RunRecord, TaskRecord

BUILT_KEY = "contributor_totals_built"  # kv: the totals hold every run (a rebuild ran)
_Key = tuple[str, int]  # (username, day)


def seconds_per_game(tc: str, threads: int) -> float:
    """CPU seconds one game of a run costs; 0 for a time control that no longer
    parses (an imported run's), so it still counts its games."""
    try:
        return threads * parse_time_control(tc).game_duration()
    except ValidationError:
        return 0.0


def run_cost(run: RunRecord) -> float:
    return seconds_per_game(run.args.tc, run.args.threads)


def of_tasks(tasks: Iterable[TaskRecord], cost: float, sign: int = 1) -> list[Contribution]:
    """Games and CPU time of `tasks` per (user, day of last update), times `sign`."""
    games: dict[_Key, int] = {}
    last: dict[_Key, float] = {}
    for task in tasks:
        played = task.wins + task.losses + task.draws
        if not played:
            continue
        key = (task.username, day_of(task.last_updated))
        games[key] = games.get(key, 0) + played
        last[key] = max(last.get(key, 0.0), task.last_updated)
    return [
        Contribution(name, sign * count, sign * count * cost, 0, last[(name, day)], day)
        for (name, day), count in games.items()
    ]


def submitted(run: RunRecord, sign: int = 1) -> Contribution:
    """One test more (or, `sign` -1, less) for the run's owner on its submission day."""
    day = day_of(run.start_time)
    return Contribution(run.username, 0, 0.0, sign, 0.0, day)


def of_change(
    stored: RunRecord, stored_tasks: list[TaskRecord], new: RunRecord, new_tasks: list[TaskRecord]
) -> list[Contribution]:
    """What one committed change of a run changes in the totals: the games of
    every task when the run finishes, re-opens, or changes its tasks finished;
    a test when it is deleted. (Nothing for a result update of a live run, which
    `write_changes` tells from three flags without calling this.)"""
    changes: list[Contribution] = []
    if stored.finished or new.finished:
        cost = run_cost(new)
        if stored.finished:
            changes += of_tasks(stored_tasks, cost, sign=-1)
        if new.finished:
            changes += of_tasks(new_tasks, cost)
    if stored.deleted != new.deleted:
        changes.append(submitted(new, sign=-1 if new.deleted else 1))
    return changes


def live(runs: Iterable[tuple[RunRecord, list[TaskRecord]]]) -> list[Contribution]:
    """The games of unfinished runs, which the stored totals leave out."""
    return [
        change
        for run, tasks in runs
        if not run.finished
        for change in of_tasks(tasks, run_cost(run))
    ]


def rebuild(storage: Storage) -> None:
    """Recompute every total from the runs and tasks (one scan of each), in one
    transaction. Minutes on a Fishtest-sized database: run by `arbiter db
    upgrade` and after an import, never on a request."""
    with storage.write() as tx:
        tx.contributions.clear()
        tx.contributions.add(_from_scan(tx))
        tx.kv.set(BUILT_KEY, True)


def built(storage: Storage) -> bool:
    with storage.read() as tx:
        return tx.kv.get(BUILT_KEY) is True


def _from_scan(tx: Tx) -> Iterator[Contribution]:
    costs: dict[str, float] = {}
    finished: set[str] = set()
    for run in tx.runs.costs():
        costs[run.run_id] = seconds_per_game(run.tc, run.threads)
        if run.finished:
            finished.add(run.run_id)
        if not run.deleted:
            yield Contribution(run.username, 0, 0.0, 1, 0.0, day_of(run.start_time))
    for row in tx.tasks.contributions():
        if row.run_id in finished and row.games:
            cost = costs[row.run_id]
            yield Contribution(
                row.username, row.games, row.games * cost, 0, row.last_updated, row.day
            )
