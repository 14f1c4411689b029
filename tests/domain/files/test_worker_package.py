"""The worker wheel the server writes from its own code."""

import hashlib
import tomllib
import zipfile
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

import arbiter
from arbiter.cli import main
from arbiter.domain.files import worker_package
from arbiter.protocol import WORKER_VERSION
from arbiter.protocol.packages import PUBLIC_KEY_BYTES, SIGNATURE_BYTES, decode_key

ROOT = Path(__file__).resolve().parents[3]
KEY = worker_package.signing_key(bytes(range(32)))


def test_the_wheel_holds_what_the_worker_distribution_declares(tmp_path: Path) -> None:
    declared = tomllib.loads((ROOT / "worker" / "pyproject.toml").read_text())
    project = declared["project"]
    assert list(worker_package.REQUIREMENTS) == project["dependencies"]
    assert project["requires-python"] == worker_package.REQUIRES_PYTHON
    assert project["name"] == worker_package.DISTRIBUTION
    included = declared["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    expected = {target.removeprefix("arbiter/") for target in included.values()}
    assert expected == {*worker_package.PACKAGE_FILES, *worker_package.PACKAGE_DIRS}

    package = worker_package.publish(tmp_path, KEY)
    with zipfile.ZipFile(package.path) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(f"arbiter_worker-{arbiter.__version__}.dist-info/METADATA").decode()
    assert "arbiter/worker/update.py" in names
    assert "arbiter/protocol/__init__.py" in names
    assert not any(name.startswith(("arbiter/web/", "arbiter/domain/")) for name in names)
    assert not any("__pycache__" in name for name in names)
    assert "Requires-Dist: httpx2==2.16.2" in metadata
    assert package.protocol == WORKER_VERSION
    assert package.filename == f"arbiter_worker-{arbiter.__version__}-py3-none-any.whl"


def test_the_wheel_is_the_same_at_every_start(tmp_path: Path) -> None:
    first = worker_package.publish(tmp_path, KEY)
    written = first.path.stat().st_mtime_ns
    second = worker_package.publish(tmp_path, KEY)
    assert first == second
    assert second.path.stat().st_mtime_ns == written  # not rewritten
    assert hashlib.sha256(second.path.read_bytes()).hexdigest() == second.sha256
    assert second.path.stat().st_size == second.size


def test_a_wheel_of_another_version_is_replaced(tmp_path: Path) -> None:
    source = Path(arbiter.__file__).parent
    directory = tmp_path / "out"
    old = worker_package.write_wheel(source, directory, "0.0.1", 300)
    new = worker_package.write_wheel(source, directory, "0.0.2", 301)
    assert not old.path.exists()
    assert [path.name for path in directory.iterdir()] == [new.filename]


def test_the_description_is_signed_and_names_every_fact_it_vouches_for(tmp_path: Path) -> None:
    package = worker_package.publish(tmp_path, KEY)
    described = package.describe()
    public_key = decode_key(str(described["public_key"]), PUBLIC_KEY_BYTES)
    signature = decode_key(str(described["signature"]), SIGNATURE_BYTES)
    assert public_key is not None
    assert signature is not None
    verifier = Ed25519PublicKey.from_public_bytes(public_key)
    verifier.verify(signature, package.statement())
    for fact in ("filename", "version", "sha256"):
        assert str(described[fact]).encode() in package.statement()
    larger = package.statement().replace(f"\n{package.size}\n".encode(), b"\n1\n")
    with pytest.raises(InvalidSignature):
        verifier.verify(signature, larger)


def test_the_signing_key_command_prints_the_key_the_server_signs_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["signing-key", "--data-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.strip()
    key_file = tmp_path / "worker-signing.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    seed = bytes.fromhex(key_file.read_text())
    assert printed == worker_package.public_key_of(worker_package.signing_key(seed))
    assert main(["signing-key", "--data-dir", str(tmp_path)]) == 0  # the same key again
    assert capsys.readouterr().out.strip() == printed
