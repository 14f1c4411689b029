"""PGN of finished games: parses with python-chess and replays the same moves."""

import io

import chess
import chess.pgn

from arbiter.worker.match.game import DRAW, GameRecord, MoveRecord, Opening
from arbiter.worker.match.pgn import game_pgn


def record(opening: Opening, moves: list[str], result: str, chess960: bool = False) -> GameRecord:
    return GameRecord(
        white="New-1234abcd",
        black="Base",
        opening=opening,
        moves=tuple(MoveRecord(m, 25, 7, 0.0123) for m in moves),
        result=result,
        termination="checkmate",
        fault=None,
        fault_white=False,
        chess960=chess960,
        duration=1.0,
        thinking=0.9,
    )


def parse(text: str) -> chess.pgn.Game:
    game = chess.pgn.read_game(io.StringIO(text))
    assert game is not None
    assert not game.errors
    return game


def test_from_the_start_position() -> None:
    moves = ["f2f3", "e7e5", "g2g4", "d8h4"]
    text = game_pgn(
        record(Opening(chess.STARTING_FEN), moves, "0-1"),
        event="Batch 3: a vs b",
        site="http://x/tests/view/1",
        round_="7",
        time_control="10+0.1",
    )
    game = parse(text)
    assert game.headers["White"] == "New-1234abcd"
    assert game.headers["Result"] == "0-1"
    assert game.headers["Round"] == "7"
    assert game.headers["PlyCount"] == "4"
    assert "FEN" not in game.headers
    assert [m.uci() for m in game.mainline_moves()] == moves
    assert game.end().board().is_checkmate()
    assert game.next() is not None
    assert game.next().comment == "+0.25/7 0.012s"  # type: ignore[union-attr]


def test_book_moves_from_a_position_and_long_games_wrap() -> None:
    fen = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
    book = ("e7e5", "g1f3")
    moves = ["b8c6", "f1b5", "g8f6", "e1g1"] + ["f6g8", "f3g5", "g8f6", "g5f3"] * 5
    text = game_pgn(
        record(Opening(fen, book), moves, DRAW), event="e", site="s", round_="1", time_control="-"
    )
    assert all(len(line) <= 80 for line in text.splitlines())
    game = parse(text)
    assert game.headers["FEN"] == fen
    assert game.headers["SetUp"] == "1"
    assert text.split("\n\n")[1].startswith("1... e5 {book} 2. Nf3 {book}")
    assert [m.uci() for m in game.mainline_moves()] == [*book, *moves]


def test_chess960_castling() -> None:
    fen = "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"
    text = game_pgn(
        record(Opening(fen), ["f1g1", "f8g8"], DRAW, chess960=True),
        event="e",
        site="s",
        round_="1",
        time_control="-",
    )
    game = parse(text)
    assert game.headers["Variant"] == "Chess960"
    assert "O-O" in text
