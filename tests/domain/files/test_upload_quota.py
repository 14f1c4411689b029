"""The daily upload quota: nets and books of one account together, files and
bytes in any 24 hours, a refusal that says when to retry and stores nothing,
other accounts untouched, and 0 lifting a bound (on both backends)."""

import hashlib
from pathlib import Path

import pytest

from arbiter.domain.errors import UploadQuotaReached, ValidationError
from arbiter.domain.files.books import BookLibrary
from arbiter.domain.files.nets import NetLibrary
from arbiter.domain.files.upload_quota import QUOTA_WINDOW, UploadQuota
from arbiter.storage import Storage
from tests.domain.files.support import stage, staged_files
from tests.domain.support import Clock

BOOK = b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n"


def net(number: int, size: int = 1000) -> tuple[str, bytes]:
    data = number.to_bytes(4, "big") * (size // 4)
    return f"nn-{hashlib.sha256(data).hexdigest()[:12]}.nnue", data


def libraries(
    storage: Storage, clock: Clock, tmp_path: Path, quota: UploadQuota
) -> tuple[NetLibrary, BookLibrary]:
    books = BookLibrary(storage, tmp_path / "books", clock, quota=quota)
    return NetLibrary(storage, clock, quota=quota), books


def upload_net(nets: NetLibrary, tmp_path: Path, number: int, user: str = "alice") -> None:
    name, data = net(number)
    nets.add(user, name, stage(tmp_path, data))


def test_the_files_of_a_day_count_nets_and_books_together(
    storage: Storage, clock: Clock, tmp_path: Path
) -> None:
    nets, books = libraries(storage, clock, tmp_path, UploadQuota(files=3, size=0))
    upload_net(nets, tmp_path, 1)
    books.add("alice", "e4.epd", stage(tmp_path, BOOK))
    clock.advance(3600)
    upload_net(nets, tmp_path, 2)
    with pytest.raises(UploadQuotaReached, match="uploaded 3 files in the last 24 hours") as full:
        upload_net(nets, tmp_path, 3)
    assert full.value.wait_seconds == QUOTA_WINDOW - 3600  # when the first stops counting
    with pytest.raises(UploadQuotaReached):
        nets.check_quota("alice")  # refused before any byte is received
    assert staged_files(tmp_path) == []
    with storage.read() as tx:
        assert len(tx.nets.list(limit=10)) == 2
    upload_net(nets, tmp_path, 4, user="bob")  # another account has its own quota


def test_the_window_slides(storage: Storage, clock: Clock, tmp_path: Path) -> None:
    nets, _books = libraries(storage, clock, tmp_path, UploadQuota(files=2, size=0))
    upload_net(nets, tmp_path, 1)
    clock.advance(10)
    upload_net(nets, tmp_path, 2)
    clock.advance(QUOTA_WINDOW - 9)  # the first is now over a day old
    upload_net(nets, tmp_path, 3)
    with pytest.raises(UploadQuotaReached):
        upload_net(nets, tmp_path, 4)


def test_the_bytes_of_a_day_are_bounded_with_the_real_size(
    storage: Storage, clock: Clock, tmp_path: Path
) -> None:
    nets, _books = libraries(storage, clock, tmp_path, UploadQuota(files=0, size=2500))
    upload_net(nets, tmp_path, 1)
    upload_net(nets, tmp_path, 2)
    nets.check_quota("alice", adding=0)  # room is judged by the size when it is known
    with pytest.raises(
        UploadQuotaReached, match=r"bring your uploads .* to 2\.9 KiB, more than the 2\.4 KiB"
    ):
        upload_net(nets, tmp_path, 3)  # 3,000 bytes in all
    with pytest.raises(UploadQuotaReached):
        nets.check_quota("alice", adding=1000)  # a declared size is judged before receiving


def test_a_file_larger_than_a_days_quota_is_a_field_error(
    storage: Storage, clock: Clock, tmp_path: Path
) -> None:
    nets, _books = libraries(storage, clock, tmp_path, UploadQuota(files=0, size=500))
    with pytest.raises(ValidationError, match="larger than the 500 bytes one account may") as big:
        upload_net(nets, tmp_path, 1)
    assert big.value.field == "file"


def test_zero_lifts_both_bounds(storage: Storage, clock: Clock, tmp_path: Path) -> None:
    nets, _books = libraries(storage, clock, tmp_path, UploadQuota(files=0, size=0))
    for number in range(5):
        upload_net(nets, tmp_path, number)
    with storage.read() as tx:
        assert tx.nets.uploaded_by("alice", 0).files == 5
