"""Finding a dump's collections and reading them one document at a time."""

from pathlib import Path

import bson
import pytest

from arbiter.importer.dump import BadDocument, DocumentStream, DumpError, find_collections
from tests.importer.fishtest_dump import T0, write_collection


def test_the_database_directory_is_found_inside_the_dump(tmp_path: Path) -> None:
    write_collection(tmp_path / "admin", "system.version", [{"_id": "x"}])
    write_collection(tmp_path / "fishtest_new", "runs", [{"_id": 1}])
    (tmp_path / "oplog.bson").write_bytes(b"")  # mongodump --oplog
    assert set(find_collections(tmp_path)) == {"runs"}
    assert set(find_collections(tmp_path / "fishtest_new")) == {"runs"}


def test_several_databases_and_none_are_refused(tmp_path: Path) -> None:
    write_collection(tmp_path / "one", "runs", [{"_id": 1}])
    write_collection(tmp_path / "two", "runs", [{"_id": 1}])
    with pytest.raises(DumpError, match="several databases"):
        find_collections(tmp_path)
    with pytest.raises(DumpError, match=r"no \.bson"):
        find_collections(_empty(tmp_path))


def _empty(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


@pytest.mark.parametrize("gzipped", [False, True])
def test_documents_stream_with_their_offsets_and_resume_there(
    tmp_path: Path, gzipped: bool
) -> None:
    documents = [{"_id": n, "when": T0, "blob": b"x" * n} for n in range(5)]
    path = write_collection(tmp_path, "runs", documents, gzipped=gzipped)
    file = find_collections(tmp_path)["runs"]
    assert file.path == path
    with DocumentStream(file) as stream:
        read = list(stream)
    assert [doc["_id"] for doc, _ in read] == [0, 1, 2, 3, 4]
    assert read[0][0]["when"] == T0  # an aware UTC datetime
    offsets = [end for _, end in read]
    assert offsets[-1] == sum(len(bson.encode(doc)) for doc in documents)
    with DocumentStream(file, offsets[1]) as stream:
        assert [doc["_id"] for doc, _ in stream] == [2, 3, 4]


def test_a_cut_file_stops_with_the_offset_of_the_last_whole_document(tmp_path: Path) -> None:
    data = b"".join(bson.encode({"_id": n}) for n in range(3))
    (tmp_path / "runs.bson").write_bytes(data[:-3])
    with DocumentStream(find_collections(tmp_path)["runs"]) as stream:
        read = []
        with pytest.raises(BadDocument) as failure:
            read.extend(doc["_id"] for doc, _ in stream)
    assert read == [0, 1]
    assert failure.value.offset == len(bson.encode({"_id": 0})) * 2
