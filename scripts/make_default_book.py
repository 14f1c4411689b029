"""Generate Arbiter's default opening book, `arbiter-openings-v1.epd`.

Positions after 8 random plies from the start position, kept only when they
look playable for both sides: equal material, not in check, at least 20 legal
moves, no capture for the side to move that wins material outright (a
hanging piece or a lower piece taking a higher one), and, scored by Debian's
Stockfish at a fixed node count, within 60 centipawns of equality.
Deterministic for a given Stockfish build: the same seed writes the same
file. The positions are facts of the game; the file is dedicated to the public
domain (CC0), like the code that makes it.

    .venv/bin/python scripts/make_default_book.py src/arbiter/data/books/arbiter-openings-v1.epd

Needs /usr/games/stockfish (Debian package stockfish); takes a few minutes.
"""

import random
import sys
from pathlib import Path

import chess
import chess.engine

SEED = 20261123
PLIES = 8
POSITIONS = 4000
ENGINE = "/usr/games/stockfish"
SCORE_NODES = 20_000
MAX_CENTIPAWNS = 60
VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}


def material(board: chess.Board, color: chess.Color) -> int:
    return sum(len(board.pieces(kind, color)) * value for kind, value in VALUES.items())


def wins_material(board: chess.Board, move: chess.Move) -> bool:
    victim = board.piece_at(move.to_square)
    attacker = board.piece_at(move.from_square)
    if victim is None or attacker is None:
        return False  # en passant trades pawn for pawn
    if not board.is_attacked_by(not board.turn, move.to_square):
        return True
    return VALUES.get(victim.piece_type, 0) > VALUES.get(attacker.piece_type, 0)


def playable(board: chess.Board) -> bool:
    if board.is_check() or board.is_game_over():
        return False
    if material(board, chess.WHITE) != material(board, chess.BLACK):
        return False
    moves = list(board.legal_moves)
    if len(moves) < 20:
        return False
    return not any(board.is_capture(m) and wins_material(board, m) for m in moves)


def random_opening(rng: random.Random) -> chess.Board:
    board = chess.Board()
    for _ in range(PLIES):
        moves = list(board.legal_moves)
        if not moves:
            break  # mated early (the fool's mate is 4 plies): playable() drops it
        board.push(rng.choice(moves))
    return board


def balanced(engine: chess.engine.SimpleEngine, board: chess.Board) -> bool:
    info = engine.analyse(board, chess.engine.Limit(nodes=SCORE_NODES), game=object())
    score = info["score"].white().score()
    return score is not None and abs(score) <= MAX_CENTIPAWNS


def generate(count: int, seed: int, engine: chess.engine.SimpleEngine) -> list[str]:
    rng = random.Random(seed)  # noqa: S311 - reproducible, not secret
    seen: set[str] = set()
    positions: list[str] = []
    while len(positions) < count:
        board = random_opening(rng)
        epd = board.epd()
        if epd in seen:
            continue
        seen.add(epd)
        if playable(board) and balanced(engine, board):
            positions.append(epd)
    return positions


def main() -> None:
    target = Path(sys.argv[1])
    with chess.engine.SimpleEngine.popen_uci(ENGINE) as engine:
        engine.configure({"Threads": 1, "Hash": 16})
        positions = generate(POSITIONS, SEED, engine)
    target.write_text("".join(f"{epd}\n" for epd in positions))
    print(f"{target}: {POSITIONS} positions")


if __name__ == "__main__":
    main()
