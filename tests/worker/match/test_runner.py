"""The match runner: pairs played several at a time, all accounted, stoppable."""

import threading
import time
from pathlib import Path

import chess
import pytest

from arbiter.worker.match import (
    REFERENCE_RULES,
    EngineSetup,
    GameRules,
    Match,
    MatchError,
    MatchSetup,
    MatchStats,
    Opening,
    PairJob,
    UnknownOption,
    parse_time_control,
)
from tests.worker.support import STOCKFISH, fake_engine, needs_stockfish

OPENINGS = [
    Opening(chess.STARTING_FEN, ("e2e4", "e7e5")),
    Opening(chess.STARTING_FEN, ("d2d4", "d7d5")),
    Opening("rnbqkbnr/pppppppp/8/8/2P5/8/PP1PPPPP/RNBQKBNR b KQkq - 0 1"),
]


def setup(command: tuple[str, ...], cwd: Path, slots: int, **options: str) -> MatchSetup:
    tc = parse_time_control("N=1000")
    return MatchSetup(
        new=EngineSetup("New", command, cwd, {"Threads": "1", **options}, tc),
        base=EngineSetup("Base", command, cwd, {"Threads": "1"}, tc),
        games_at_once=slots,
        rules=GameRules(REFERENCE_RULES),
    )


def jobs(count: int) -> list[PairJob]:
    return [PairJob(i, OPENINGS[i % len(OPENINGS)]) for i in range(count)]


def test_every_pair_is_played_once_with_colours_swapped(tmp_path: Path) -> None:
    match = Match(setup(fake_engine(tmp_path), tmp_path, slots=3))
    try:
        outcomes = list(match.play(jobs(7), threading.Event()))
    finally:
        match.close()
    assert sorted(o.job.index for o in outcomes) == list(range(7))
    stats = MatchStats()
    for outcome in outcomes:
        first, second = outcome.games
        assert (first.white, second.white) == ("New", "Base")
        assert first.opening == second.opening == outcome.job.opening
        stats.add_pair(outcome.games)
    assert stats.games == 14
    assert sum(stats.pentanomial) == 7


def test_engines_are_kept_between_calls_and_restarted_after_a_crash(tmp_path: Path) -> None:
    crashing = fake_engine(tmp_path, "crash", after=3)
    match = Match(setup(crashing, tmp_path, slots=1))
    try:
        outcomes = list(match.play(jobs(2), threading.Event()))
        outcomes += list(match.play(jobs(1), threading.Event()))
    finally:
        match.close()
    stats = MatchStats()
    for outcome in outcomes:
        stats.add_pair(outcome.games)
    assert stats.crashes == 6  # every game ends with a crash, each engine restarts


def test_abort_stops_promptly_and_counts_nothing_unfinished(tmp_path: Path) -> None:
    match = Match(setup(fake_engine(tmp_path, "slow", after=0, value=0.2), tmp_path, slots=2))
    abort = threading.Event()
    threading.Timer(0.5, abort.set).start()
    started = time.monotonic()
    try:
        outcomes = list(match.play(jobs(50), abort))
    finally:
        match.close()
    assert time.monotonic() - started < 3.0
    assert outcomes == []


def test_leaving_the_iteration_early_stops_the_slots(tmp_path: Path) -> None:
    match = Match(setup(fake_engine(tmp_path), tmp_path, slots=2))
    before = set(threading.enumerate())
    try:
        for _ in match.play(jobs(40), threading.Event()):
            break
        # No slot thread left behind (threads of other tests in this process may
        # come and go meanwhile: only the ones started since `before` count).
        deadline = time.monotonic() + 5
        while set(threading.enumerate()) - before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not set(threading.enumerate()) - before
    finally:
        match.close()


def test_an_unknown_option_fails_the_match(tmp_path: Path) -> None:
    match = Match(setup(fake_engine(tmp_path), tmp_path, slots=2, Contempt="10"))
    with pytest.raises(MatchError) as failure:
        list(match.play(jobs(4), threading.Event()))
    match.close()
    assert isinstance(failure.value.cause, UnknownOption)


def test_an_engine_that_will_not_start_fails_the_match(tmp_path: Path) -> None:
    match = Match(setup((str(tmp_path / "nothing"),), tmp_path, slots=1))
    with pytest.raises(MatchError, match="cannot start"):
        list(match.play(jobs(1), threading.Event()))
    match.close()


def test_per_batch_options_reach_the_engines(tmp_path: Path) -> None:
    needs_stockfish()
    match = Match(setup((STOCKFISH,), tmp_path, slots=2))
    weak = {"Skill Level": "0"}
    batch = [PairJob(i, OPENINGS[i % 3], {}, weak) for i in range(4)]
    try:
        outcomes = list(match.play(batch, threading.Event()))
    finally:
        match.close()
    stats = MatchStats()
    for outcome in outcomes:
        stats.add_pair(outcome.games)
    assert stats.wins > stats.losses  # full strength against skill level 0
    assert stats.crashes == stats.time_losses == stats.illegal_moves == 0
