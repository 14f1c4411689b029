"""Contributor totals kept as runs change are what a rebuild from the tasks gives."""

import pytest

from arbiter.domain.accounts import User
from arbiter.domain.runs import contribution_totals
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.base import Contribution
from tests.domain.runs.support import Clock, approved_run, pairs, submit, take_task, worker

PER_GAME = (10 + 6.8) * 2 * 0.92  # CPU seconds of a 10+0.1 game on one thread


def play(runs: Runs, user: User, run_id: str, key: str, games_pairs: int) -> None:
    info = worker(user.username, key=key)
    reply = take_task(runs, user, info)
    assert reply["run"]["_id"] == run_id  # the only approved live run
    runs.ingest.update_task(info, run_id, reply["task_id"], pairs(dd=games_pairs))


def stored(storage: Storage) -> tuple[list[Contribution], list[Contribution]]:
    with storage.read() as tx:
        return tx.contributions.all_time(), tx.contributions.since(0)


def rounded(rows: list[Contribution]) -> list[tuple[object, ...]]:
    """The rows with CPU seconds rounded (sums in another order differ in the last
    bits), without the last activity (a re-opened run does not take it back)."""
    return [(r.username, r.games, round(r.cpu_seconds, 6), r.tests) for r in rows]


def assert_rebuild_agrees(storage: Storage) -> None:
    kept = stored(storage)
    contribution_totals.rebuild(storage)
    rebuilt = stored(storage)
    assert [rounded(rows) for rows in kept] == [rounded(rows) for rows in rebuilt]


def test_totals_kept_live_equal_a_rebuild_through_a_runs_life(
    runs: Runs, storage: Storage, clock: Clock, alice: User, root: User, repo_url: str
) -> None:
    # Stopped before its games are played: undecided, so a modify re-opens it.
    finished = approved_run(runs, alice, root, repo_url, num_games=2000)
    deleted = submit(runs, root, repo_url)
    play(runs, alice, finished, "abcd", 50)
    clock.advance(86400)  # the next day: totals per day tell the days apart
    play(runs, root, finished, "ef01", 10)
    assert_rebuild_agrees(storage)

    runs.lifecycle.stop(root, finished)
    runs.lifecycle.delete(root, deleted)
    assert_rebuild_agrees(storage)
    live = approved_run(runs, alice, root, repo_url, num_games=2000)
    play(runs, alice, live, "0123", 5)
    assert_rebuild_agrees(storage)
    (alice_total, root_total) = stored(storage)[0]
    assert (alice_total.games, alice_total.tests) == (100, 2)
    assert alice_total.cpu_seconds == pytest.approx(100 * PER_GAME)
    assert (root_total.games, root_total.tests) == (20, 0)

    runs.lifecycle.modify(alice, finished, {"info": "once more"})  # re-opens it
    assert_rebuild_agrees(storage)
    assert stored(storage)[0][0].games == 0  # its games count again once it finishes
    runs.lifecycle.delete(alice, finished)
    assert_rebuild_agrees(storage)
    assert [(t.username, t.games, t.tests) for t in stored(storage)[0]] == [
        ("alice", 100, 1),
        ("root", 20, 0),
    ]


def test_the_contributors_table_adds_live_runs_to_the_stored_totals(
    runs: Runs, clock: Clock, alice: User, root: User, repo_url: str
) -> None:
    finished = approved_run(runs, alice, root, repo_url, num_games=2000)
    play(runs, alice, finished, "abcd", 50)
    runs.lifecycle.stop(alice, finished)
    live = approved_run(runs, alice, root, repo_url, num_games=2000)
    play(runs, root, live, "ef01", 10)
    table = {c.username: (c.games, c.tests) for c in runs.contributors.table()}
    assert table == {"alice": (100, 2), "root": (20, 0)}
    assert runs.cpu_hours("root") == pytest.approx(20 * PER_GAME / 3600)
    assert runs.cpu_hours("alice") == pytest.approx(100 * PER_GAME / 3600)
    summary = runs.contributors.summary()
    assert (summary.testers, summary.developers, summary.games, summary.tests) == (2, 1, 120, 2)


def test_a_rebuild_marks_the_totals_built(storage: Storage) -> None:
    assert not contribution_totals.built(storage)
    contribution_totals.rebuild(storage)
    assert contribution_totals.built(storage)
