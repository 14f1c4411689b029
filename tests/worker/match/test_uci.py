"""The UCI engine process: handshake, options, searches, failures."""

import threading
import time
from pathlib import Path

import pytest

from arbiter.worker.match.uci import (
    MATE_SCORE,
    Aborted,
    EngineDisconnected,
    EngineStartError,
    EngineTimeout,
    UciEngine,
    UnknownOption,
    parse_info,
    parse_speed,
)
from tests.worker.support import STOCKFISH, fake_engine, needs_stockfish


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("info depth 12 seldepth 15 score cp 34 nodes 1000 pv e2e4", (34, 12)),
        ("info depth 20 score mate 3 pv a1a2", (MATE_SCORE - 3, 20)),
        ("info depth 20 score mate -2", (-MATE_SCORE + 2, 20)),
        ("info depth 0 score mate 0", (-MATE_SCORE, 0)),
        ("info depth 7 score cp -12 lowerbound nodes 5", (-12, 7)),
        ("info score cp x", (None, None)),
        ("info string hello", (None, None)),
    ],
)
def test_parse_info(line: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_info(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("info depth 12 score cp 34 nodes 150000 nps 1000000 time 150 pv e2e4", (150000, 150)),
        ("info depth 1 score cp 3 nodes 20 time 0 pv e2e4", (0, 0)),  # too quick to time
        ("info depth 12 score cp 34 nodes 1000 pv e2e4", (0, 0)),  # no time
        ("info depth 12 score cp 34 nodes x time 3", (0, 0)),
        ("info depth 12 score cp 34 time 30 nodes", (0, 0)),
    ],
)
def test_parse_speed(line: str, expected: tuple[int, int]) -> None:
    assert parse_speed(line) == expected


def test_handshake_options_and_search(tmp_path: Path) -> None:
    engine = UciEngine(fake_engine(tmp_path), tmp_path, "fake")
    engine.start()
    try:
        assert engine.id_name == "Fake play"
        assert set(engine.options) == {"hash", "threads", "skill level"}
        engine.configure({"hash": "32", "Skill Level": "3"})
        with pytest.raises(UnknownOption, match="Contempt"):
            engine.configure({"Contempt": "0"})
        engine.new_game()
        engine.wait_ready()
        found = engine.search("position startpos moves e2e4", "go nodes 10", 5.0, None)
        assert len(found.move) == 4
        assert (found.score, found.depth) == (0, 3)
        assert found.elapsed < 5.0
    finally:
        engine.quit()
    assert not engine.alive


def test_a_crash_is_a_disconnect(tmp_path: Path) -> None:
    engine = UciEngine(fake_engine(tmp_path, "crash"), tmp_path, "fake")
    engine.start()
    with pytest.raises(EngineDisconnected):
        engine.search("position startpos", "go nodes 1", 5.0, None)
    engine.kill()


def test_a_silent_engine_times_out_and_an_abort_interrupts(tmp_path: Path) -> None:
    engine = UciEngine(fake_engine(tmp_path, "stall"), tmp_path, "fake")
    engine.start()
    try:
        with pytest.raises(EngineTimeout):
            engine.search("position startpos", "go nodes 1", 0.3, None)
        abort = threading.Event()
        threading.Timer(0.2, abort.set).start()
        started = time.monotonic()
        with pytest.raises(Aborted):
            engine.search("position startpos", "go nodes 1", 30.0, abort)
        assert time.monotonic() - started < 2.0
        assert not engine.stop_search()  # the fake ignores `stop`
    finally:
        engine.kill()


def test_an_engine_that_does_not_exist(tmp_path: Path) -> None:
    engine = UciEngine((str(tmp_path / "missing"),), tmp_path, "ghost")
    with pytest.raises(EngineStartError, match="cannot start"):
        engine.start()


def test_a_program_that_is_no_uci_engine(tmp_path: Path) -> None:
    engine = UciEngine(("/bin/true",), tmp_path, "true")
    with pytest.raises(EngineStartError, match="handshake"):
        engine.start()
    assert not engine.alive


def test_stockfish(tmp_path: Path) -> None:
    needs_stockfish()
    engine = UciEngine((STOCKFISH,), tmp_path, "sf")
    engine.start()
    try:
        engine.configure({"Threads": "1", "Hash": "16"})
        engine.new_game()
        engine.wait_ready()
        found = engine.search("position startpos", "go nodes 2000", 10.0, None)
        assert found.move[:2] in {"e2", "d2", "g1", "c2", "b1", "e7", "g2", "a2", "h2", "f2", "b2"}
        assert found.score is not None
        assert found.nodes >= 1  # its speed, from its last info line
        assert found.search_ms >= 0
    finally:
        engine.quit()
