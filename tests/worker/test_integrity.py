"""A worker's files against its install record: the `modified` flag it reports."""

import base64
import hashlib
from importlib.metadata import PathDistribution
from pathlib import Path

from arbiter.worker.identity import make_worker_info, new_unique_key
from arbiter.worker.integrity import check_installation, modified_files
from tests.worker.test_identity import CONFIG


def record_hash(content: bytes) -> str:
    """As pip writes it into RECORD: urlsafe base64 of the SHA-256, unpadded."""
    return (
        "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    )


def installed(site: Path, files: dict[str, bytes], *, hashed: bool = True) -> PathDistribution:
    """A distribution installed in `site` as pip leaves it: files and a RECORD."""
    dist_info = site / "arbiter-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: arbiter\nVersion: 1.0\n")
    lines = []
    for name, content in files.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        lines.append(f"{name},{record_hash(content) if hashed else ''},{len(content)}")
    lines.append("arbiter/__pycache__/loop.cpython-311.pyc,,")
    lines.append("arbiter-1.0.dist-info/RECORD,,")
    (dist_info / "RECORD").write_text("\n".join(lines) + "\n")
    return PathDistribution(dist_info)


FILES = {"arbiter/__init__.py": b"", "arbiter/worker/loop.py": b"def play(): ...\n"}


def test_files_as_installed_are_not_modified(tmp_path: Path) -> None:
    assert modified_files(installed(tmp_path, FILES)) == []


def test_an_edited_or_removed_file_is_found(tmp_path: Path) -> None:
    distribution = installed(tmp_path, FILES)
    (tmp_path / "arbiter/worker/loop.py").write_bytes(b"def play(): cheat()\n")
    assert modified_files(distribution) == ["arbiter/worker/loop.py"]
    (tmp_path / "arbiter/__init__.py").unlink()
    assert sorted(modified_files(distribution) or []) == [
        "arbiter/__init__.py",
        "arbiter/worker/loop.py",
    ]


def test_a_record_without_hashes_cannot_be_checked(tmp_path: Path) -> None:
    """An editable install records no hash of the modules: not checkable."""
    assert modified_files(installed(tmp_path, FILES, hashed=False)) is None


def test_this_checkout_says_what_it_checked() -> None:
    modified, note = check_installation()
    assert note.startswith("worker files: ")
    assert modified == ("modified since installed" in note)


def test_the_flag_reaches_worker_info() -> None:
    info = make_worker_info(CONFIG, None, new_unique_key("box1"), "x86-64", modified=True)
    assert info.modified
    assert not make_worker_info(CONFIG, None, new_unique_key("box1"), "x86-64").modified
