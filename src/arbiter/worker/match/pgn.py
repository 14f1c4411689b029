"""PGN text of finished games, written directly (SAN via python-chess).

Each engine move carries a comment `{score/depth time}` as engine matches
usually do; the opening's moves are marked `{book}`. Pure.
"""

import datetime

import chess

from arbiter.worker.match.game import GameRecord

LINE_WIDTH = 80


def game_pgn(game: GameRecord, *, event: str, site: str, round_: str, time_control: str) -> str:
    board = chess.Board(game.opening.fen, chess960=game.chess960)
    headers = [
        ("Event", event),
        ("Site", site),
        ("Date", datetime.datetime.now(datetime.UTC).strftime("%Y.%m.%d")),
        ("Round", round_),
        ("White", game.white),
        ("Black", game.black),
        ("Result", game.result),
    ]
    if game.opening.fen != chess.STARTING_FEN:
        headers += [("SetUp", "1"), ("FEN", game.opening.fen)]
    if game.chess960:
        headers.append(("Variant", "Chess960"))
    headers += [
        ("TimeControl", time_control),
        ("Termination", game.termination + (f" {game.detail}" if game.detail else "")),
        ("PlyCount", str(len(game.opening.moves) + len(game.moves))),
    ]
    tokens: list[str] = []
    plies = [(move, "book") for move in game.opening.moves]
    plies += [(m.uci, _comment(m.score, m.depth, m.elapsed)) for m in game.moves]
    for index, (text, comment) in enumerate(plies):
        move = board.parse_uci(text)
        if board.turn == chess.WHITE:
            tokens.append(f"{board.fullmove_number}.")
        elif index == 0:
            tokens.append(f"{board.fullmove_number}...")
        tokens.append(board.san(move))
        tokens.append("{" + comment + "}")
        board.push(move)
    tokens.append(game.result)
    tag_lines = "".join(f'[{name} "{_escape(value)}"]\n' for name, value in headers)
    return f"{tag_lines}\n{_wrap(tokens)}\n\n"


def _comment(score: int | None, depth: int | None, elapsed: float) -> str:
    evaluation = "-" if score is None else f"{score / 100:+.2f}"
    return f"{evaluation}/{depth if depth is not None else 0} {elapsed:.3f}s"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _wrap(tokens: list[str]) -> str:
    lines: list[str] = []
    current = ""
    for token in tokens:
        if current and len(current) + 1 + len(token) > LINE_WIDTH:
            lines.append(current)
            current = token
        else:
            current = f"{current} {token}" if current else token
    lines.append(current)
    return "\n".join(lines)
