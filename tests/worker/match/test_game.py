"""Games between fake engines: every way a game ends, and its record."""

from collections.abc import Iterator
from pathlib import Path

import chess
import pytest

from arbiter.worker.match import timecontrol
from arbiter.worker.match.adjudication import REFERENCE_RULES
from arbiter.worker.match.game import (
    BLACK_WINS,
    DRAW,
    WHITE_WINS,
    Fault,
    GameRules,
    Opening,
    Player,
    play_game,
    rules_ending,
)
from arbiter.worker.match.timecontrol import parse_time_control
from arbiter.worker.match.uci import UciEngine
from tests.worker.support import STOCKFISH, fake_engine, needs_stockfish

NO_ADJUDICATION = GameRules(None)


def player(
    tmp_path: Path,
    name: str,
    mode: str = "play",
    tc: str = "N=10",
    *,
    after: int = 0,
    value: float = 0,
    seed: int = 1,
) -> Player:
    command = fake_engine(tmp_path, mode, after=after, value=value, seed=seed)
    engine = UciEngine(command, tmp_path, name)
    engine.start()
    return Player(engine, name, parse_time_control(tc))


@pytest.fixture
def players() -> Iterator[list[Player]]:
    started: list[Player] = []
    yield started
    for each in started:
        each.engine.quit()


def start(players: list[Player], *made: Player) -> tuple[Player, ...]:
    players.extend(made)
    return made


@pytest.mark.parametrize(
    ("fen", "expected"),
    [
        ("7k/6Q1/6K1/8/8/8/8/8 b - - 0 1", (WHITE_WINS, "checkmate")),
        ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", (DRAW, "stalemate")),
        ("8/8/4k3/8/8/4K3/8/8 w - - 0 1", (DRAW, "insufficient material")),
        ("8/8/4k3/8/8/4K3/4R3/8 w - - 100 80", (DRAW, "50-move rule")),
        ("8/8/4k3/8/8/4K3/4R3/8 w - - 0 1", None),
    ],
)
def test_rules_ending(fen: str, expected: tuple[str, str] | None) -> None:
    assert rules_ending(chess.Board(fen)) == expected


def test_threefold_repetition() -> None:
    board = chess.Board()
    for _ in range(2):
        for move in ("g1f3", "g8f6", "f3g1", "f6g8"):
            board.push_uci(move)
    assert rules_ending(board) == (DRAW, "threefold repetition")


def test_random_movers_play_a_legal_game_to_its_end(tmp_path: Path, players: list[Player]) -> None:
    white, black = start(players, player(tmp_path, "A", seed=1), player(tmp_path, "B", seed=2))
    record = play_game(white, black, Opening(chess.STARTING_FEN, ("e2e4", "e7e5")), NO_ADJUDICATION)
    board = chess.Board()
    for move in (*record.opening.moves, *(m.uci for m in record.moves)):
        assert board.is_legal(chess.Move.from_uci(move))
        board.push_uci(move)
    assert record.fault is None
    assert rules_ending(board) == (record.result, record.termination)
    assert record.white == "A"
    assert 0 < record.thinking <= record.duration


def test_a_crash_loses_and_is_marked(tmp_path: Path, players: list[Player]) -> None:
    white, black = start(players, player(tmp_path, "A"), player(tmp_path, "B", "crash", after=3))
    record = play_game(white, black, Opening(chess.STARTING_FEN), NO_ADJUDICATION)
    assert (record.result, record.fault, record.fault_white) == (WHITE_WINS, Fault.CRASH, False)
    assert len(record.moves) == 7
    assert not black.engine.alive


def test_a_stall_under_fixed_nodes_loses(
    tmp_path: Path, players: list[Player], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timecontrol, "STALL_SECONDS", 0.3)  # the fake never answers search 3
    white, black = start(players, player(tmp_path, "A", "stall", after=2), player(tmp_path, "B"))
    record = play_game(white, black, Opening(chess.STARTING_FEN), NO_ADJUDICATION)
    assert (record.result, record.fault, record.termination) == (
        BLACK_WINS,
        Fault.STALL,
        "engine stalled",
    )
    assert not white.engine.alive  # killed: it ignored `stop`


def test_a_time_forfeit(tmp_path: Path, players: list[Player]) -> None:
    slow = player(tmp_path, "A", "slow", tc="0.4+0", after=1, value=0.3)
    white, black = start(players, slow, player(tmp_path, "B", tc="10+0"))
    record = play_game(white, black, Opening(chess.STARTING_FEN), NO_ADJUDICATION)
    assert (record.result, record.fault, record.termination) == (
        BLACK_WINS,
        Fault.TIME,
        "time forfeit",
    )


def test_a_time_forfeit_against_a_bare_king_is_a_draw(
    tmp_path: Path, players: list[Player]
) -> None:
    slow = player(tmp_path, "A", "slow", tc="0.2+0", after=0, value=0.5)
    white, black = start(players, slow, player(tmp_path, "B", tc="10+0"))
    opening = Opening("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1")  # black has only its king
    record = play_game(white, black, opening, NO_ADJUDICATION)
    assert (record.result, record.fault) == (DRAW, Fault.TIME)


def test_an_illegal_move_loses(tmp_path: Path, players: list[Player]) -> None:
    white, black = start(players, player(tmp_path, "A"), player(tmp_path, "B", "illegal", after=1))
    record = play_game(white, black, Opening(chess.STARTING_FEN), NO_ADJUDICATION)
    assert (record.result, record.fault, record.detail) == (WHITE_WINS, Fault.ILLEGAL, "a1a8")
    assert len(record.moves) == 3


def test_resign_adjudication(tmp_path: Path, players: list[Player]) -> None:
    hopeless = player(tmp_path, "A", "score", value=-800)
    white, black = start(players, hopeless, player(tmp_path, "B", "score", value=800))
    record = play_game(white, black, Opening(chess.STARTING_FEN), GameRules(REFERENCE_RULES))
    assert (record.result, record.termination) == (BLACK_WINS, "adjudication: resign")
    assert len(record.moves) == 5  # white's third move at -800 ends it
    unadjudicated = play_game(white, black, Opening(chess.STARTING_FEN), NO_ADJUDICATION)
    assert unadjudicated.termination != "adjudication: resign"


def test_draw_adjudication(tmp_path: Path, players: list[Player]) -> None:
    white, black = start(players, player(tmp_path, "A", seed=5), player(tmp_path, "B", seed=6))
    record = play_game(white, black, Opening(chess.STARTING_FEN), GameRules(REFERENCE_RULES))
    if record.termination == "adjudication: draw":
        assert len(record.moves) == 68  # move 34 reached with 8 quiet moves each
    else:  # the random game ended by the rules first
        assert len(record.moves) < 68


def test_a_real_game_between_stockfish_engines(tmp_path: Path) -> None:
    needs_stockfish()
    engines = [UciEngine((STOCKFISH,), tmp_path, name) for name in ("New", "Base")]
    for engine in engines:
        engine.start()
    try:
        tc = parse_time_control("N=1000")
        white, black = (Player(e, e.name, tc) for e in engines)
        opening = Opening("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
        record = play_game(white, black, opening, GameRules(REFERENCE_RULES))
        assert record.fault is None
        assert record.result in (WHITE_WINS, BLACK_WINS, DRAW)
        assert all(m.score is not None for m in record.moves)
    finally:
        for engine in engines:
            engine.quit()
