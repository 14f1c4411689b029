"""Real wheels and real virtual environments for the self-update tests, offline.

The worker's dependencies come from a wheelhouse made of the distributions
installed in the test's own environment (repacked, as their RECORD lists
them), so pip installs them with `--no-index` and no test reaches PyPI. An
older worker is the current source with its protocol and version lowered,
packed by the server's own wheel writer.
"""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

import arbiter
from arbiter.domain.files import worker_package
from arbiter.domain.files.worker_package import WorkerPackage

SKIPPED_METADATA = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def requirement_closure(roots: tuple[str, ...]) -> list[importlib.metadata.Distribution]:
    """The installed distributions `roots` need, with their own needs, markers evaluated."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    pending = [Requirement(root) for root in roots]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in seen:
            continue
        distribution = importlib.metadata.distribution(requirement.name)
        seen[key] = distribution
        pending += [Requirement(text) for text in distribution.requires or []]
    return list(seen.values())


def repack(distribution: importlib.metadata.Distribution, directory: Path) -> Path:
    """A wheel of an installed distribution, from the files its RECORD lists."""
    files = [
        path
        for path in distribution.files or []
        if not str(path).startswith("..")
        and "__pycache__" not in path.parts
        and path.name not in SKIPPED_METADATA
    ]
    dist_info = next(p.parts[0] for p in files if p.parts[0].endswith(".dist-info"))
    wheel_text = distribution.read_text("WHEEL") or ""
    tags = [line[4:].strip() for line in wheel_text.splitlines() if line.startswith("Tag:")]
    tag = tags[0]  # one this interpreter accepts: the distribution is installed here
    name = re.sub(r"[-_.]+", "_", distribution.metadata["Name"]).lower()
    path = directory / f"{name}-{distribution.version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            archive.write(Path(str(distribution.locate_file(file))), file.as_posix())
        archive.writestr(f"{dist_info}/RECORD", "")  # pip accepts an empty RECORD
    return path


def make_wheelhouse(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for distribution in requirement_closure(worker_package.REQUIREMENTS):
        repack(distribution, directory)
    return directory


def older_worker_wheel(directory: Path, *, version: str, protocol: int) -> WorkerPackage:
    """The worker of this source tree, claiming an older version and protocol."""
    source = older_source(directory / "source", version=version, protocol=protocol)
    return worker_package.write_wheel(source, directory / "wheel", version, protocol)


def older_source(directory: Path, *, version: str, protocol: int) -> Path:
    """A copy of this `arbiter` package (server included) claiming an older
    version and protocol; `directory` goes on PYTHONPATH to run it."""
    source = directory / "arbiter"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(arbiter.__file__).parent, source, ignore=ignore)
    _replace(source / "__init__.py", f'"{arbiter.__version__}"', f'"{version}"')
    protocol_file = source / "protocol" / "__init__.py"
    _replace(protocol_file, "WORKER_VERSION = 325", f"WORKER_VERSION = {protocol}")
    return source


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def offline_pip(wheelhouse: Path) -> dict[str, str]:
    """The environment of a process whose pip must use only the wheelhouse;
    without PYTHONPATH, so an installed worker runs its own code."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
        ARBITER_WORKER_GIT_ALLOW="file",  # the tests' sample repositories are local
    )
    return env


def make_environment(path: Path, wheel: Path, wheelhouse: Path) -> Path:
    """A virtual environment with `wheel` installed by pip; its python."""
    env = offline_pip(wheelhouse)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=env)
    python = path / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        env=offline_pip(wheelhouse),
    )
    return python
