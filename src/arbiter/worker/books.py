"""Opening books: download, verify, read, and place a task's openings.

A book is fetched from the server (`/api/book/<name>`) or, when the server
does not host it, from the official-stockfish/books repository as
`<name>.zip` (as the official worker fetches every book; `ARBITER_BOOKS_URL`
names a mirror of it). Either way it is checked against the `book_sri` the
server sent with the task (`protocol.books`), before use and again when a
cached copy is reused. EPD books give one position per line; PGN books give each
game's first `2 × book_depth` plies. Every worker shuffles a book with the
same seed (from the run id), and a task takes the openings at its own game
offset, so the tasks of a run use disjoint windows of one shared order
(reference 2.5, point 5). Blocking (network and disk): the task's thread.
"""

import hashlib
import io
import os
import random
import zipfile
from collections.abc import Sequence
from pathlib import Path

import chess
import chess.pgn

from arbiter.protocol.books import CATALOGUE_BOOKS_URL, book_sri
from arbiter.worker.client import ApiClient, NotFoundError, TransportError
from arbiter.worker.errors import WorkerError
from arbiter.worker.match.game import Opening

KEEP_BOOKS = 4  # cached books kept on disk (reference 2.2)
MAX_BOOK_BYTES = 1 << 30  # an unpacked catalogue book; the largest are ~100 MB


def catalogue_url() -> str:
    """Where catalogue books are fetched: the official repository or a mirror."""
    return os.environ.get("ARBITER_BOOKS_URL", CATALOGUE_BOOKS_URL).rstrip("/")


def ensure_book(client: ApiClient, directory: Path, name: str, sri: str) -> Path:
    """The verified local copy of book `name`, downloaded if needed."""
    if not sri:
        sri = _listed_sri(client, name)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    if path.exists() and book_sri(path.read_bytes()) == sri:
        path.touch()  # recently used: pruned last
        return path
    data = _download(client, name)
    if book_sri(data) != sri:
        raise WorkerError(f"book {name}: the download does not match its sri {sri}")
    temporary = path.with_name(path.name + ".part")
    temporary.write_bytes(data)
    temporary.replace(path)
    prune_books(directory)
    return path


def _download(client: ApiClient, name: str) -> bytes:
    try:
        return client.get(f"/api/book/{name}")
    except NotFoundError:
        pass  # not hosted here: a catalogue book
    url = f"{catalogue_url()}/{name}.zip"
    try:
        archive = client.download(url)
    except NotFoundError:
        raise WorkerError(f"book {name}: neither the server nor {url} has it") from None
    except TransportError as error:
        raise WorkerError(f"book {name}: {error}") from None
    return _unzip(archive, name)


def _unzip(archive: bytes, name: str) -> bytes:
    """The book from its zip; a bad or oversized archive is the book's failure."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as members:
            info = members.getinfo(name)
            if info.file_size > MAX_BOOK_BYTES:
                raise WorkerError(f"book {name}: {info.file_size} bytes unpacked, too large")
            return members.read(info)
    except (zipfile.BadZipFile, KeyError) as error:
        raise WorkerError(f"book {name}: unusable zip archive ({error})") from None


def _listed_sri(client: ApiClient, name: str) -> str:
    """The SRI from the server's book list, for a task that came without one."""
    books = client.get_json("/api/books").get("books", {})
    entry = books.get(name) if isinstance(books, dict) else None
    sri = entry.get("sri") if isinstance(entry, dict) else None
    if not isinstance(sri, str) or not sri:
        raise WorkerError(f"book {name}: the server lists no SRI for it")
    return sri


def prune_books(directory: Path, keep: int = KEEP_BOOKS) -> None:
    books = sorted(
        (p for p in directory.iterdir() if p.is_file() and not p.name.endswith(".part")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for stale in books[keep:]:
        stale.unlink(missing_ok=True)


# ---------------------------------------------------------------- reading


def read_book(path: Path, plies: int, chess960: bool = False) -> list[Opening]:
    """Every opening of an EPD or PGN book; WorkerError for an unusable book."""
    text = path.read_text(encoding="utf-8", errors="replace")
    openings = (
        read_pgn_openings(text, plies, chess960)
        if path.suffix.lower() == ".pgn"
        else read_epd_openings(text, chess960)
    )
    if not openings:
        raise WorkerError(f"book {path.name} holds no usable opening")
    return openings


def read_epd_openings(text: str, chess960: bool = False) -> list[Opening]:
    openings = []
    board = chess.Board(chess960=chess960)
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        try:
            board.set_epd(line)
        except ValueError:
            continue  # a bad line costs one opening, not the task
        if board.is_valid():
            openings.append(Opening(board.fen()))
    return openings


def read_pgn_openings(text: str, plies: int, chess960: bool = False) -> list[Opening]:
    openings = []
    stream = io.StringIO(text)
    while (game := chess.pgn.read_game(stream)) is not None:
        if game.errors:
            continue
        board = game.board()
        if chess960:
            board.chess960 = True
        start = board.fen()
        moves: list[str] = []
        for move in game.mainline_moves():
            if len(moves) >= plies:
                break
            moves.append(board.uci(move))
            board.push(move)
        openings.append(Opening(start, tuple(moves)))
    return openings


def openings_for_task(
    book: Sequence[Opening], run_id: str, first_pair: int, pairs: int
) -> list[Opening]:
    """The openings of pairs `first_pair` .. `first_pair + pairs - 1` of the run.

    The book is shuffled with a seed from the run id, the same on every
    worker; the run's pairs walk that order (wrapping around), so each task,
    placed by its starting game, plays openings no other task of the run
    plays until the book is used up.
    """
    order = list(range(len(book)))
    random.Random(run_seed(run_id)).shuffle(order)  # noqa: S311 - reproducible on purpose
    return [book[order[(first_pair + n) % len(order)]] for n in range(pairs)]


def run_seed(run_id: str) -> int:
    return int.from_bytes(hashlib.sha1(run_id.encode()).digest()[:8], "big")  # noqa: S324 - a seed
