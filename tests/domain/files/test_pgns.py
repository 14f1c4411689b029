import base64
import gzip
import zlib

import pytest

from arbiter.domain.errors import BadRequest, NotFound
from arbiter.domain.files import pgns
from arbiter.domain.files.pgns import (
    PgnArchive,
    decode_pgn_upload,
    parse_run_pgns_name,
    parse_task_pgn_name,
)
from arbiter.storage import Storage
from tests.domain.support import Clock

RUN = "0123456789abcdef01234567"
GAME = '[Event "Batch 0"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n'


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_decode_returns_the_gzip_bytes() -> None:
    data = gzip.compress(GAME.encode())
    assert decode_pgn_upload(encoded(data)) == data


def test_decode_accepts_concatenated_members() -> None:
    data = gzip.compress(GAME.encode()) + gzip.compress(GAME.encode())
    assert decode_pgn_upload(encoded(data)) == data


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not base64!", "not valid base64"),
        ("", "empty"),
        (encoded(GAME.encode()), "not gzip"),
        (encoded(gzip.compress(GAME.encode())[:-12]), "truncated"),
        (encoded(b"\x1f\x8b" + b"\x00" * 40), "not valid gzip"),
    ],
)
def test_decode_refuses_what_is_not_a_gzip_pgn(text: str, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        decode_pgn_upload(text)


def test_decode_stops_inflating_at_the_size_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgns, "MAX_PGN_TEXT_BYTES", 10_000_000)
    bomb = gzip.compress(b"\x00" * 50_000_000)  # 50 MB of zeros in ~50 kB
    assert len(bomb) < 100_000
    with pytest.raises(BadRequest, match="larger than 10000000 bytes"):
        decode_pgn_upload(encoded(bomb))


def test_decode_refuses_oversized_compressed_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgns, "MAX_PGN_GZIP_BYTES", 100)
    data = gzip.compress(bytes(range(256)) * 10, compresslevel=0)
    with pytest.raises(BadRequest, match="compressed"):
        decode_pgn_upload(encoded(data))


def test_names() -> None:
    assert parse_task_pgn_name(f"{RUN}-17.pgn") == (RUN, 17)
    # As the reference, which keeps what precedes the first dot.
    for name in (f"{RUN}-17", f"{RUN}-17.pgn.gz", f"{RUN}-17."):
        assert parse_task_pgn_name(name) == (RUN, 17)
    assert parse_run_pgns_name(f"{RUN}.pgn.gz") == RUN
    for bad in (f"{RUN}.pgn", f"{RUN}-x.pgn", "../etc-1.pgn", f"{RUN}-1\n", f'{RUN}-1."x'):
        with pytest.raises(NotFound):
            parse_task_pgn_name(bad)
    for bad in ("../x.pgn.gz", f"{RUN}.pgn", "a-b.pgn.gz"):
        with pytest.raises(NotFound):
            parse_run_pgns_name(bad)


def test_archive_stores_replaces_and_concatenates(storage: Storage, clock: Clock) -> None:
    archive = PgnArchive(storage, clock)
    first, second = gzip.compress(b"first\n"), gzip.compress(b"second\n")
    archive.store(RUN, 1, first)
    archive.store(RUN, 0, b"stale")
    archive.store(RUN, 0, second)  # a retried upload replaces the earlier one
    assert archive.task_pgn(RUN, 1) == first
    assert archive.run_task_ids(RUN) == [0, 1]
    joined = b"".join(archive.run_archive(RUN, [0, 1]))
    assert gzip.decompress(joined) == b"second\nfirst\n"


def first_member(data: bytes) -> bytes:
    """What a reader that stops after the first gzip member sees."""
    return zlib.decompressobj(wbits=31).decompress(data)


def test_a_runs_archive_is_one_member_that_every_reader_reads_whole(
    storage: Storage, clock: Clock
) -> None:
    """Tasks stored as several members, or whose text ends mid-line, still come
    back whole and apart to a reader of one member, and games stay countable."""
    archive = PgnArchive(storage, clock)
    two_members = gzip.compress(GAME.encode()) + gzip.compress(GAME.encode())
    archive.store(RUN, 0, two_members)
    archive.store(RUN, 1, gzip.compress(GAME.rstrip().encode()))  # no final newline
    archive.store(RUN, 2, gzip.compress(GAME.encode()))
    joined = b"".join(archive.run_archive(RUN, [0, 1, 2]))
    text = first_member(joined).decode()
    assert text == GAME * 2 + GAME.rstrip() + "\n\n" + GAME
    assert text.count('[Event "Batch 0"]') == 4
    assert gzip.decompress(joined).decode() == text  # and nothing follows the member


def test_archive_reports_what_is_missing(storage: Storage, clock: Clock) -> None:
    archive = PgnArchive(storage, clock)
    with pytest.raises(NotFound):
        archive.task_pgn(RUN, 0)
    with pytest.raises(NotFound):
        archive.run_task_ids(RUN)
    stored = gzip.compress(b"x")  # once: each call stamps the current second in its header
    archive.store(RUN, 0, stored)
    assert gzip.decompress(b"".join(archive.run_archive(RUN, [0, 5]))) == b"x\n\n"
    assert archive.delete_run(RUN) == 1
    with pytest.raises(NotFound):
        archive.run_task_ids(RUN)


def test_pgns_past_their_retention_are_deleted_oldest_first(
    storage: Storage, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgns, "EXPIRE_BATCH", 2)  # several transactions
    archive = PgnArchive(storage, clock)
    for task_id in range(5):
        archive.store(RUN, task_id, gzip.compress(b"old"))
        clock.advance(60)
    clock.advance(9 * pgns.DAY)
    archive.store(RUN, 5, gzip.compress(b"recent"))
    assert archive.expire(0) == 0  # 0 keeps every PGN
    assert archive.run_task_ids(RUN) == [0, 1, 2, 3, 4, 5]
    assert archive.expire(10) == 0  # nothing is ten days old yet
    clock.advance(pgns.DAY)
    assert archive.expire(10) == 5
    assert archive.run_task_ids(RUN) == [5]
    assert archive.expire(10) == 0
