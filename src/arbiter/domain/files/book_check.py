"""What makes a file an opening book: EPD positions or PGN games, counted.

Every EPD line is checked for the shape of a position and a spread sample is
parsed fully with python-chess (a full parse costs ~40 µs a line, too slow for
the multi-million-line books people use); every PGN game header is counted and
the first games are parsed. Runs in the threadpool.
"""

import io
import re
from collections.abc import Iterator
from pathlib import Path

from arbiter.domain.errors import ValidationError

_EPD_SHAPE = re.compile(
    r"^[pnbrqkPNBRQK1-8/]{15,71} [wb] (-|[KQkqA-Ha-h]{1,4}) (-|[a-h][36])(\s|$)"
)
FULLY_PARSED_EPD_LINES = 2000
FULLY_PARSED_PGN_GAMES = 50


def count_positions(path: Path, name: str) -> int:
    """Positions (EPD lines) or games (PGN) in a book; ValidationError if it is not one."""
    chess960 = "960" in name or "frc" in name.lower()
    if name.endswith(".epd"):
        return _count_epd(path, chess960)
    return _count_pgn(path)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8") as text:
            for number, line in enumerate(text, start=1):
                yield number, line.strip()
    except UnicodeDecodeError:
        raise ValidationError("file", "The book is not UTF-8 text") from None


def _count_epd(path: Path, chess960: bool) -> int:
    positions = 0
    for number, line in _lines(path):
        if not line:
            continue
        positions += 1
        if not _EPD_SHAPE.match(line):
            raise ValidationError("file", f"Line {number} is not an EPD position: {line[:80]}")
        if _sampled(positions):
            _parse_epd(number, line, chess960)
    if positions == 0:
        raise ValidationError("file", "The book holds no positions")
    return positions


def _sampled(index: int) -> bool:
    """The first lines, then every 97th: a spread sample of a sorted book."""
    return index <= FULLY_PARSED_EPD_LINES // 2 or index % 97 == 0


def _parse_epd(number: int, line: str, chess960: bool) -> None:
    import chess  # here, not at start-up: only a book upload parses positions

    try:
        board, _ = chess.Board.from_epd(line, chess960=chess960)
    except ValueError as error:
        raise ValidationError("file", f"Line {number}: {error}") from None
    if not board.is_valid():
        raise ValidationError("file", f"Line {number} is not a legal position: {line[:80]}")


def _count_pgn(path: Path) -> int:
    games = 0
    head: list[str] = []
    for _, line in _lines(path):
        if line.startswith("[Event "):
            games += 1
        if games <= FULLY_PARSED_PGN_GAMES:
            head.append(line)
    if games == 0:
        raise ValidationError("file", "The book holds no PGN games ([Event ...] headers)")
    _parse_pgn_games("\n".join(head))
    return games


def _parse_pgn_games(text: str) -> None:
    import chess.pgn  # here, not at start-up: only a book upload parses games

    stream = io.StringIO(text)
    for index in range(1, FULLY_PARSED_PGN_GAMES + 1):
        game = chess.pgn.read_game(stream)
        if game is None:
            return
        if game.errors:
            raise ValidationError("file", f"Game {index}: {game.errors[0]}")
