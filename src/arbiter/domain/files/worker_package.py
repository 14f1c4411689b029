"""The worker distribution this server publishes for its workers' self-update.

The server writes, from its own installed `arbiter` package, the wheel of
the worker distribution (worker/pyproject.toml: the CLI, `protocol`, `stats`
and `worker`, without the server's dependencies), so a worker that meets a
newer protocol installs exactly the code the server runs, from the server
and from no third party. The wheel is written here rather than by a build
backend because an installed server has no source tree and no hatchling;
a wheel is a zip file with three metadata files, which the standard library
writes.

The bytes are deterministic (sorted entries, fixed timestamps), so every
process sharing the data directory, and every restart, publishes the same
file with the same sha256. Its description is signed with the operator's
Ed25519 key (protocol/packages.py says what is signed), so a worker that has
pinned the key installs only what this server's operator published, whatever
carried it. Blocking: called once at start-up, in the threadpool.
"""

import base64
import hashlib
import io
import os
import re
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from arbiter.protocol.packages import encode_key, package_statement

DISTRIBUTION = "arbiter-worker"
# Exactly the dependencies of worker/pyproject.toml (a test compares them).
REQUIREMENTS: tuple[str, ...] = (
    "httpx2==2.16.2",
    "chess==1.11.2",
    "msgspec==0.22.0",
    "cryptography==50.0.2",
)
REQUIRES_PYTHON = ">=3.11"
# What the worker distribution holds of the `arbiter` package (worker/pyproject.toml).
PACKAGE_FILES: tuple[str, ...] = ("__init__.py", "__main__.py", "cli.py", "py.typed")
PACKAGE_DIRS: tuple[str, ...] = ("protocol", "stats", "worker")
PACKAGE_DIRECTORY = "worker-package"  # under the data dir
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*([a-z0-9.+-]*)")


@dataclass(frozen=True, slots=True)
class WorkerPackage:
    version: str
    protocol: int
    filename: str
    sha256: str
    size: int
    path: Path
    public_key: str = ""  # base64 of the raw Ed25519 key; "" when unsigned
    signature: str = ""  # base64, over `statement()`

    def statement(self) -> bytes:
        return package_statement(self.filename, self.version, self.protocol, self.sha256, self.size)

    def describe(self) -> dict[str, str | int]:
        """The body of GET /api/worker/package.json."""
        return {
            "version": self.version,
            "protocol": self.protocol,
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
            "public_key": self.public_key,
            "signature": self.signature,
        }


def signing_key(seed: bytes) -> Ed25519PrivateKey:
    """The operator's signing key from its 32-byte seed (the key file's hex)."""
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key_of(key: Ed25519PrivateKey) -> str:
    return encode_key(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def signed(package: "WorkerPackage", key: Ed25519PrivateKey) -> "WorkerPackage":
    """The package with its description signed by `key`."""
    signature = encode_key(key.sign(package.statement()))
    return replace(package, public_key=public_key_of(key), signature=signature)


def wheel_filename(version: str) -> str:
    return f"{DISTRIBUTION.replace('-', '_')}-{version}-py3-none-any.whl"


def publish(data_dir: Path, key: Ed25519PrivateKey) -> WorkerPackage:
    """The wheel of the running server's own worker code, written under
    `data_dir/worker-package/` (atomically, only when its bytes changed), and
    its description signed with `key`."""
    import arbiter
    from arbiter.protocol import WORKER_VERSION

    source = Path(arbiter.__file__).parent
    directory = data_dir / PACKAGE_DIRECTORY
    return signed(write_wheel(source, directory, arbiter.__version__, WORKER_VERSION), key)


def write_wheel(source: Path, directory: Path, version: str, protocol: int) -> WorkerPackage:
    """Write the worker wheel of the `arbiter` package at `source` into `directory`,
    removing the wheels of other versions there."""
    if not _VERSION.fullmatch(version):
        raise ValueError(f"not a version: {version!r}")
    data = wheel_bytes(source, version)
    filename = wheel_filename(version)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    if not path.exists() or path.read_bytes() != data:
        staging = directory / f".{filename}.{os.getpid()}.tmp"
        staging.write_bytes(data)
        staging.replace(path)
    for other in directory.glob("*.whl"):
        if other.name != filename:
            other.unlink(missing_ok=True)
    return WorkerPackage(
        version=version,
        protocol=protocol,
        filename=filename,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        path=path,
    )


def wheel_bytes(source: Path, version: str) -> bytes:
    """The wheel's bytes: the package files, then METADATA, WHEEL, entry points, RECORD."""
    entries = [(f"arbiter/{name}", (source / name).read_bytes()) for name in PACKAGE_FILES]
    for directory in PACKAGE_DIRS:
        for path in sorted((source / directory).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                relative = path.relative_to(source).as_posix()
                entries.append((f"arbiter/{relative}", path.read_bytes()))
    dist_info = f"{DISTRIBUTION.replace('-', '_')}-{version}.dist-info"
    entries += [
        (f"{dist_info}/METADATA", _metadata(version).encode()),
        (f"{dist_info}/WHEEL", _WHEEL.encode()),
        (f"{dist_info}/entry_points.txt", _ENTRY_POINTS.encode()),
    ]
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in entries]
    record.append(f"{dist_info}/RECORD,,")
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _metadata(version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DISTRIBUTION}",
        f"Version: {version}",
        "Summary: Arbiter volunteer worker: builds engines from git and plays paired games",
        "License: GPL-3.0-or-later",
        f"Requires-Python: {REQUIRES_PYTHON}",
        *(f"Requires-Dist: {requirement}" for requirement in REQUIREMENTS),
    ]
    return "\n".join(lines) + "\n"


_WHEEL = "Wheel-Version: 1.0\nGenerator: arbiter\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
_ENTRY_POINTS = "[console_scripts]\narbiter = arbiter.cli:main\n"
