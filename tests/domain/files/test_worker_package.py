"""The worker wheel the server writes from its own code."""

import hashlib
import tomllib
import zipfile
from pathlib import Path

import arbiter
from arbiter.domain.files import worker_package
from arbiter.protocol import WORKER_VERSION

ROOT = Path(__file__).resolve().parents[3]


def test_the_wheel_holds_what_the_worker_distribution_declares(tmp_path: Path) -> None:
    declared = tomllib.loads((ROOT / "worker" / "pyproject.toml").read_text())
    project = declared["project"]
    assert list(worker_package.REQUIREMENTS) == project["dependencies"]
    assert project["requires-python"] == worker_package.REQUIRES_PYTHON
    assert project["name"] == worker_package.DISTRIBUTION
    included = declared["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    expected = {target.removeprefix("arbiter/") for target in included.values()}
    assert expected == {*worker_package.PACKAGE_FILES, *worker_package.PACKAGE_DIRS}

    package = worker_package.publish(tmp_path)
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
    first = worker_package.publish(tmp_path)
    written = first.path.stat().st_mtime_ns
    second = worker_package.publish(tmp_path)
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
