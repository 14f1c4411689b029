import hashlib
from collections.abc import Mapping
from pathlib import Path

import pytest

from arbiter.domain.actions import Actions
from arbiter.domain.errors import NotFound, ValidationError
from arbiter.domain.files.download_counts import DownloadCounts
from arbiter.domain.files.nets import NetLibrary
from arbiter.domain.files.stored import DamagedFile
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from arbiter.storage.errors import StorageUnavailable
from arbiter.storage.schema import file_chunks
from tests.domain.files.support import stage, staged_files, stored_bytes
from tests.domain.support import Clock

NET = b"NNUE" + bytes(range(256)) * 64


def net_name(data: bytes) -> str:
    return f"nn-{hashlib.sha256(data).hexdigest()[:12]}.nnue"


@pytest.fixture
def library(storage: Storage, clock: Clock, tmp_path: Path) -> NetLibrary:
    return NetLibrary(storage, clock)


def test_upload_publishes_the_file_and_records_it(
    library: NetLibrary, storage: Storage, tmp_path: Path
) -> None:
    name = net_name(NET)
    net = library.add("alice", name, stage(tmp_path, NET))
    assert net.sha256 == hashlib.sha256(NET).hexdigest()
    assert net.size == len(NET)
    _net, stored = library.open_for_download(name, count=False)
    assert (stored.size, stored.etag) == (len(NET), net.sha256)
    assert stored_bytes(storage, stored) == NET
    assert [n.name for n in library.list()] == [name]
    assert staged_files(tmp_path) == []
    logged = Actions(storage).list(ActionFilter(action="upload_nn"))
    assert [(a["username"], a["message"]) for a in logged] == [
        ("alice", f"{name} ({len(NET)} bytes)")
    ]


@pytest.mark.parametrize(
    ("name", "data", "field", "message"),
    [
        ("net.nnue", NET, "name", "nn-<first 12 hex"),
        ("nn-ABCDEF012345.nnue", NET, "name", "nn-<first 12 hex"),
        ("nn-000000000000.nnue", NET, "file", "it should be named " + net_name(NET)),
        (net_name(b""), b"", "file", "empty"),
    ],
)
def test_refused_uploads_leave_nothing(
    library: NetLibrary, tmp_path: Path, name: str, data: bytes, field: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as refused:
        library.add("alice", name, stage(tmp_path, data))
    assert refused.value.field == field
    assert library.list() == []
    assert staged_files(tmp_path) == []
    assert not (tmp_path / "nets").exists() or list((tmp_path / "nets").iterdir()) == []


def test_a_name_is_uploaded_once(library: NetLibrary, tmp_path: Path) -> None:
    name = net_name(NET)
    library.add("alice", name, stage(tmp_path, NET))
    with pytest.raises(ValidationError, match="already uploaded"):
        library.add("bob", name, stage(tmp_path, NET))
    assert [n.username for n in library.list()] == ["alice"]
    assert staged_files(tmp_path) == []


def stored_downloads(storage: Storage, name: str) -> int:
    with storage.read() as tx:
        net = tx.nets.get(name)
    assert net is not None
    return net.downloads


def test_downloads_are_counted_in_memory_and_written_by_a_flush(
    library: NetLibrary, storage: Storage, tmp_path: Path
) -> None:
    name = net_name(NET)
    library.add("alice", name, stage(tmp_path, NET))
    for _ in range(3):
        _net, stored = library.open_for_download(name)
        assert stored_bytes(storage, stored) == NET
    assert stored_downloads(storage, name) == 0  # a download is no database write
    assert library.get(name).downloads == 3  # what this process counted is shown
    assert [net.downloads for net in library.list()] == [3]

    assert library.flush_downloads() == 3
    assert stored_downloads(storage, name) == 3
    assert library.get(name).downloads == 3
    assert library.flush_downloads() == 0  # nothing is written twice


def test_flushes_of_two_processes_add_up(
    library: NetLibrary, storage: Storage, tmp_path: Path
) -> None:
    name = net_name(NET)
    library.add("alice", name, stage(tmp_path, NET))
    other = NetLibrary(storage)  # a secondary sharing the database
    library.open_for_download(name)
    other.open_for_download(name)
    other.open_for_download(name)
    library.flush_downloads()
    other.flush_downloads()
    assert stored_downloads(storage, name) == 3


def test_a_look_without_counting_is_not_a_download(
    library: NetLibrary, storage: Storage, tmp_path: Path
) -> None:
    name = net_name(NET)
    library.add("alice", name, stage(tmp_path, NET))
    library.open_for_download(name, count=False)
    assert library.flush_downloads() == 0
    assert library.get(name).downloads == 0


def test_counts_of_a_failed_flush_wait_for_the_next() -> None:
    written: list[dict[str, int]] = []

    def write_once_storage_is_back(counts: Mapping[str, int]) -> None:
        if not written:
            written.append({})
            raise StorageUnavailable("database restarting")
        written.append(dict(counts))

    counts = DownloadCounts(write_once_storage_is_back)
    counts.count("a")
    counts.count("a")
    with pytest.raises(StorageUnavailable):
        counts.flush()
    counts.count("b")
    assert counts.pending("a") == 2
    assert counts.flush() == 3
    assert written[-1] == {"a": 2, "b": 1}


@pytest.mark.parametrize(
    "name", ["nn-000000000000.nnue", "../../etc/passwd", "x", "nn-0123456789ab.nnue\n"]
)
def test_unknown_nets_are_not_found(library: NetLibrary, name: str) -> None:
    with pytest.raises(NotFound):
        library.open_for_download(name)


def test_a_net_larger_than_a_chunk_is_stored_in_checked_chunks(
    library: NetLibrary, storage: Storage, tmp_path: Path
) -> None:
    big = NET * 70  # 1.1 MiB: two chunks
    name = net_name(big)
    library.add("alice", name, stage(tmp_path, big))
    _net, stored = library.open_for_download(name, count=False)
    with storage.read() as tx:
        assert tx.file_chunks.count("net", name) == 2
    assert stored_bytes(storage, stored) == big
    with storage.write() as tx:  # a damaged row: the bytes change, the recorded hash does not
        tx.connection.execute(
            file_chunks.update()
            .where(file_chunks.c.name == name, file_chunks.c.seq == 1)
            .values(data=b"not the net")
        )
    with pytest.raises(DamagedFile, match="chunk 1 is damaged"):
        stored_bytes(storage, stored)
