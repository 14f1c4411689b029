"""Opening books: download with SRI check, EPD and PGN reading, task windows."""

import io
import os
import zipfile
from pathlib import Path

import chess
import pytest

from arbiter.protocol.books import book_sri as sri_of
from arbiter.worker.books import (
    ensure_book,
    openings_for_task,
    prune_books,
    read_book,
    read_epd_openings,
    read_pgn_openings,
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
    with pytest.raises(WorkerError, match="does not match its sri"):
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
    with pytest.raises(WorkerError, match=r"neither the server nor .*x\.epd\.zip has it"):
        ensure_book(FakeServer().client(), tmp_path, "x.epd", sri_of(EPD))


CATALOGUE_PATH = "/official-stockfish/books/master/c.epd.zip"


def zipped(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


def test_a_book_the_server_does_not_host_comes_from_the_catalogue(tmp_path: Path) -> None:
    server = FakeServer()  # answers every host: the catalogue's path is that of its URL
    crlf = EPD.replace(b"\n", b"\r\n")
    server.files[CATALOGUE_PATH] = zipped("c.epd", crlf)
    path = ensure_book(server.client(), tmp_path, "c.epd", sri_of(EPD))
    assert path.read_bytes() == crlf  # kept as published; its sri is that of its text
    assert server.paths() == ["/api/book/c.epd", CATALOGUE_PATH]


def test_a_mirror_of_the_catalogue_can_be_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARBITER_BOOKS_URL", "http://mirror.test/books/")
    server = FakeServer()
    server.files["/books/c.epd.zip"] = zipped("c.epd", EPD)
    ensure_book(server.client(), tmp_path, "c.epd", sri_of(EPD))
    assert server.paths()[-1] == "/books/c.epd.zip"


def test_a_catalogue_download_that_is_not_its_book_is_refused(tmp_path: Path) -> None:
    server = FakeServer()
    server.files[CATALOGUE_PATH] = zipped("other.epd", EPD)
    with pytest.raises(WorkerError, match="unusable zip"):
        ensure_book(server.client(), tmp_path, "c.epd", sri_of(EPD))
    server.files[CATALOGUE_PATH] = b"not a zip"
    with pytest.raises(WorkerError, match="unusable zip"):
        ensure_book(server.client(), tmp_path, "c.epd", sri_of(EPD))
    server.files[CATALOGUE_PATH] = zipped("c.epd", EPD + b"tampered")
    with pytest.raises(WorkerError, match="does not match its sri"):
        ensure_book(server.client(), tmp_path, "c.epd", sri_of(EPD))
    assert not (tmp_path / "c.epd").exists()


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
