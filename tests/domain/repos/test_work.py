"""The git executor's admission: a global cap, a per-account cap, refusals at once."""

import threading

import pytest

from arbiter.domain.errors import GitBusy, TooManyGitReads
from arbiter.domain.repos.work import GitWork


def test_caps_refuse_at_once_and_free_their_places() -> None:
    work = GitWork(threads=3, per_account=2, retry_after=7)
    release = threading.Event()
    held = [work.submit(name, lambda: release.wait(10)) for name in ("alice", "Alice", "bob")]
    assert work.in_flight() == 3
    with pytest.raises(TooManyGitReads) as mine:
        work.submit("ALICE", lambda: True)  # names count case-insensitively
    assert mine.value.wait_seconds == 7
    assert "Try again in 7 s" in str(mine.value)
    with pytest.raises(GitBusy) as everyone:
        work.submit("carol", lambda: True)
    assert everyone.value.wait_seconds == 7
    release.set()
    assert [future.result(10) for future in held] == [True, True, True]
    assert work.in_flight() == 0
    assert work.call("carol", lambda: "done") == "done"
    work.shutdown()


def test_a_failure_frees_its_place_and_reaches_the_caller() -> None:
    work = GitWork(threads=1, per_account=1, retry_after=1)

    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        work.call("alice", fail)
    assert work.in_flight() == 0
    work.shutdown()


def test_work_runs_in_its_own_named_threads() -> None:
    work = GitWork(threads=2, per_account=2, retry_after=1)
    assert work.call("alice", lambda: threading.current_thread().name).startswith("arbiter-git")
    work.shutdown()


def test_half_the_threads_are_kept_for_accounts_with_nothing_in_flight() -> None:
    """Four accounts with slow repositories, two submissions each, used to fill
    all eight threads; now their second reads find the kept half closed, and
    every other account's first read runs."""
    work = GitWork(threads=8, per_account=2, retry_after=3)
    release = threading.Event()

    def slow() -> bool:
        return release.wait(10)

    held = [work.submit(f"tarpit{n}", slow) for n in range(4)]
    for n in range(4):
        with pytest.raises(TooManyGitReads, match="keeping its other git threads"):
            work.submit(f"tarpit{n}", slow)
    held += [work.submit(f"honest{n}", slow) for n in range(4)]
    assert work.in_flight() == 8
    with pytest.raises(GitBusy):
        work.submit("honest4", slow)
    release.set()
    assert all(future.result(10) for future in held)
    work.shutdown()


def test_an_account_alone_may_use_its_whole_share() -> None:
    work = GitWork(threads=8, per_account=2, retry_after=3)
    release = threading.Event()
    held = [work.submit("alice", lambda: release.wait(10)) for _ in range(2)]
    assert work.in_flight() == 2
    release.set()
    assert all(future.result(10) for future in held)
    work.shutdown()
