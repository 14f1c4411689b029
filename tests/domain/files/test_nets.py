import hashlib
from pathlib import Path

import pytest

from arbiter.domain.actions import Actions
from arbiter.domain.errors import NotFound, ValidationError
from arbiter.domain.files.nets import NetLibrary
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from tests.domain.files.support import stage, staged_files
from tests.domain.support import Clock

NET = b"NNUE" + bytes(range(256)) * 64


def net_name(data: bytes) -> str:
    return f"nn-{hashlib.sha256(data).hexdigest()[:12]}.nnue"


@pytest.fixture
def library(storage: Storage, clock: Clock, tmp_path: Path) -> NetLibrary:
    return NetLibrary(storage, tmp_path / "nets", clock)


def test_upload_publishes_the_file_and_records_it(
    library: NetLibrary, storage: Storage, tmp_path: Path
) -> None:
    name = net_name(NET)
    net = library.add("alice", name, stage(tmp_path, NET))
    assert net.sha256 == hashlib.sha256(NET).hexdigest()
    assert net.size == len(NET)
    assert library.path_of(name).read_bytes() == NET
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


def test_download_counts(library: NetLibrary, tmp_path: Path) -> None:
    name = net_name(NET)
    library.add("alice", name, stage(tmp_path, NET))
    for _ in range(3):
        _net, path = library.open_for_download(name)
        assert path.read_bytes() == NET
    assert library.get(name).downloads == 3


@pytest.mark.parametrize("name", ["nn-000000000000.nnue", "../../etc/passwd", "x"])
def test_unknown_nets_are_not_found(library: NetLibrary, name: str) -> None:
    with pytest.raises(NotFound):
        library.open_for_download(name)
