"""Opening books: download with SRI check, EPD and PGN reading, task windows."""

import os
from pathlib import Path

import chess
import pytest

from arbiter.worker.books import (
    ensure_book,
    openings_for_task,
    prune_books,
    read_book,
    read_epd_openings,
    read_pgn_openings,
    sri_of,
)
from arbiter.worker.errors import WorkerError
from arbiter.worker.match.game import Opening
from tests.worker.fakes import RUN_ID, FakeServer

SHIPPED = (
    Path(__file__).parents[2] / "src" / "arbiter" / "data" / "books" / "arbiter-openings-v1.epd"
)
EPD = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - bm e5;\nnot a position\n\n"


def test_download_verify_and_reuse(tmp_path: Path) -> None:
    server = FakeServer()
    server.files["/api/book/a.epd"] = EPD
    client = server.client()
    path = ensure_book(client, tmp_path, "a.epd", sri_of(EPD))
    assert path.read_bytes() == EPD
    ensure_book(client, tmp_path, "a.epd", sri_of(EPD))
    assert server.paths() == ["/api/book/a.epd"]  # the second time from disk


def test_a_book_that_does_not_match_its_sri_is_refused(tmp_path: Path) -> None:
    server = FakeServer()
    server.files["/api/book/a.epd"] = EPD + b"tampered"
    with pytest.raises(WorkerError, match="SRI"):
        ensure_book(server.client(), tmp_path, "a.epd", sri_of(EPD))
    assert not (tmp_path / "a.epd").exists()


def test_a_changed_cached_copy_is_fetched_again(tmp_path: Path) -> None:
    (tmp_path / "a.epd").write_bytes(b"stale")
    server = FakeServer()
    server.files["/api/book/a.epd"] = EPD
    ensure_book(server.client(), tmp_path, "a.epd", sri_of(EPD))
    assert (tmp_path / "a.epd").read_bytes() == EPD


def test_without_an_sri_the_book_list_gives_it(tmp_path: Path) -> None:
    server = FakeServer()
    server.files["/api/book/a.epd"] = EPD
    server.files["/api/books"] = b'{"books": {"a.epd": {"sri": "%s", "size": 1, "total": 1}}}' % (
        sri_of(EPD).encode()
    )
    ensure_book(server.client(), tmp_path, "a.epd", "")
    with pytest.raises(WorkerError, match="no SRI"):
        ensure_book(server.client(), tmp_path, "b.epd", "")


def test_unknown_book(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match="no book"):
        ensure_book(FakeServer().client(), tmp_path, "x.epd", "sha384-x")


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    for n in range(6):
        path = tmp_path / f"{n}.epd"
        path.write_text("x")
        os.utime(path, (n, n))
    prune_books(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["4.epd", "5.epd"]


def test_epd_lines() -> None:
    openings = read_epd_openings(EPD.decode())
    assert openings == [Opening("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")]


def test_the_shipped_book_reads_whole() -> None:
    openings = read_book(SHIPPED, 16)
    assert len(openings) == len(SHIPPED.read_text().splitlines())
    assert all(chess.Board(o.fen).is_valid() for o in openings[:50])


def test_pgn_openings_stop_at_the_book_depth(tmp_path: Path) -> None:
    pgn = (
        '[Event "a"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 *\n\n'
        '[Event "b"]\n[FEN "8/8/4k3/8/8/4K3/4R3/8 w - - 0 1"]\n[SetUp "1"]\n\n1. Re1 Kd5 *\n'
    )
    openings = read_pgn_openings(pgn, plies=4)
    assert openings[0] == Opening(chess.STARTING_FEN, ("e2e4", "e7e5", "g1f3", "b8c6"))
    assert openings[1] == Opening("8/8/4k3/8/8/4K3/4R3/8 w - - 0 1", ("e2e1", "e6d5"))
    path = tmp_path / "b.pgn"
    path.write_text(pgn)
    assert read_book(path, 2) == [
        Opening(chess.STARTING_FEN, ("e2e4", "e7e5")),
        Opening("8/8/4k3/8/8/4K3/4R3/8 w - - 0 1", ("e2e1", "e6d5")),
    ]


def test_an_empty_book_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.epd"
    path.write_text("nonsense\n")
    with pytest.raises(WorkerError, match="no usable opening"):
        read_book(path, 8)


def test_tasks_take_disjoint_windows_of_one_shared_order() -> None:
    book = [Opening(f"fen {n}") for n in range(100)]
    first = openings_for_task(book, RUN_ID, 0, 30)
    second = openings_for_task(book, RUN_ID, 30, 30)
    assert not set(first) & set(second)
    assert openings_for_task(book, RUN_ID, 30, 30) == second  # the same on every worker
    assert openings_for_task(book, "f" * 24, 0, 30) != first  # another run, another order
    assert len(set(openings_for_task(book, RUN_ID, 0, 100))) == 100
    assert openings_for_task(book, RUN_ID, 100, 1) == first[:1]  # wraps around
