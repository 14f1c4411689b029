"""Self-update: when the server speaks a newer protocol, install the worker
the server publishes and continue as that worker.

The package comes from the worker's own server and from nowhere else
(`/api/worker/package.json`, then `/api/worker/package`), over https (or
from this machine) unless the owner allows plain http, and its description
must be signed with the server's pinned key (package_trust.py). The download
is checked against the signed size and sha256, installed with pip into a
fresh virtual environment under `<data dir>/envs/`, asked for its protocol,
and only then made current: the symlink `envs/current` is replaced by a
rename, which is atomic. The worker then re-executes itself from that
environment with the same data directory (whose worker.ini holds every
setting; a token from the environment is inherited).

Anything that fails before the rename leaves the running worker as it was,
logs why, and is tried again an hour later; a partial environment (a kill
-9 during pip) is removed by the next attempt. A worker that starts while
`envs/current` holds a newer worker than itself switches to it at once, so
a service started from the originally installed worker runs the update.

Called in the main thread, between tasks: no task is in progress when the
worker switches.
"""

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arbiter import __version__
from arbiter.protocol import WORKER_VERSION
from arbiter.protocol.packages import package_statement
from arbiter.worker.client import ApiClient
from arbiter.worker.errors import UpdateError, WorkerError
from arbiter.worker.package_trust import (
    PinnedKey,
    UpdateTrust,
    check_transport,
    verify,
)
from arbiter.worker.state import StateFile

log = logging.getLogger("arbiter.worker.update")

PACKAGE_INFO_PATH = "/api/worker/package.json"
PACKAGE_PATH = "/api/worker/package"
ENVS_DIR = "envs"
CURRENT_LINK = "current"
MARKER = "arbiter-worker.json"  # in an environment: what it holds, written once it works
RETRY_SECONDS = 3600.0  # after a failed update
STEP_TIMEOUT = 900.0  # s for one step (venv, pip install)
MAX_PACKAGE_BYTES = 50 * 1024 * 1024

_FILENAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,200}\.whl")
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*([a-z0-9.+-]*)")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class RestartWorker(Exception):  # noqa: N818 - a request, not an error
    """Re-execute the worker with `python` (raised up to the command, which
    releases the data directory first)."""

    def __init__(self, python: Path) -> None:
        super().__init__(str(python))
        self.python = python


@dataclass(frozen=True, slots=True)
class PackageInfo:
    version: str
    protocol: int
    filename: str
    sha256: str
    size: int
    public_key: str = ""  # "" from a server that does not sign
    signature: str = ""

    @classmethod
    def parse(cls, data: dict[str, object]) -> "PackageInfo":
        version, protocol = data.get("version"), data.get("protocol")
        filename, sha256, size = data.get("filename"), data.get("sha256"), data.get("size")
        public_key, signature = data.get("public_key", ""), data.get("signature", "")
        if not (isinstance(public_key, str) and isinstance(signature, str)):
            raise UpdateError(f"{PACKAGE_INFO_PATH}: bad public_key or signature")
        if not (isinstance(version, str) and _VERSION.fullmatch(version)):
            raise UpdateError(f"{PACKAGE_INFO_PATH}: bad version {version!r}")
        if not isinstance(protocol, int) or isinstance(protocol, bool):
            raise UpdateError(f"{PACKAGE_INFO_PATH}: bad protocol {protocol!r}")
        if not (isinstance(filename, str) and _FILENAME.fullmatch(filename)):
            raise UpdateError(f"{PACKAGE_INFO_PATH}: bad filename {filename!r}")
        if not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
            raise UpdateError(f"{PACKAGE_INFO_PATH}: bad sha256 {sha256!r}")
        if not (isinstance(size, int) and 0 < size <= MAX_PACKAGE_BYTES):
            raise UpdateError(f"{PACKAGE_INFO_PATH}: bad size {size!r}")
        return cls(version, protocol, filename, sha256, size, public_key, signature)

    def statement(self) -> bytes:
        """What the server signed of this package (protocol/packages.py)."""
        return package_statement(self.filename, self.version, self.protocol, self.sha256, self.size)

    @property
    def environment_name(self) -> str:
        return f"{self.version}-p{self.protocol}-{self.sha256[:12]}"


def python_of(environment: Path) -> Path:
    return environment / "bin" / "python"


def reexec_command(python: Path, data_dir: Path) -> list[str]:
    """The command a worker restarts with: isolated mode (-I), so neither
    PYTHONPATH nor the working directory can bring the old code back."""
    return [str(python), "-I", "-m", "arbiter", "worker", "--data-dir", str(data_dir)]


def restart(python: Path, data_dir: Path, environment: dict[str, str]) -> None:
    """Replace this process with the worker of `python` (same pid), in
    `environment`. Never returns."""
    logging.shutdown()  # flush worker.log: exec does not run exit handlers
    sys.stdout.flush()
    sys.stderr.flush()
    command = reexec_command(python, data_dir)
    os.execve(command[0], command, environment)  # noqa: S606 - our own interpreter


class SelfUpdate:
    """The worker's updater, consulted with each request_version answer."""

    def __init__(
        self,
        client: ApiClient,
        data_dir: Path,
        *,
        enabled: bool,
        state: StateFile | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        trust: UpdateTrust | None = None,
    ) -> None:
        self.client = client
        self.trust = trust or UpdateTrust()
        self.key = PinnedKey(data_dir, self.trust)
        self._pinned = False
        self.stop = stop  # set when the worker must exit: an update under way gives up
        self.state = state
        self.data_dir = data_dir
        self.enabled = enabled
        self._clock = clock
        self._next_attempt = 0.0
        self.last_failure = ""

    @property
    def envs(self) -> Path:
        return self.data_dir / ENVS_DIR

    def on_server_protocol(self, protocol: int) -> None:
        """Update when `protocol` is newer than ours: raises RestartWorker once
        the new worker is current; logs and returns when it cannot. The first
        answer of a server no newer than this worker pins its signing key (a
        newer one pins it as it updates)."""
        if protocol <= WORKER_VERSION:
            if self.enabled and not self._pinned:
                self._pin_server_key()
            return
        if not self.enabled:
            log.warning(
                "the server speaks protocol %d, this worker %d, and self_update is off"
                " in worker.ini: please upgrade",
                protocol, WORKER_VERSION,
            )  # fmt: skip
            return
        if self._clock() < self._next_attempt:
            return
        log.info("the server speaks protocol %d, this one %d: updating", protocol, WORKER_VERSION)
        if self.state is not None:
            self.state.activity(f"updating to the server's worker (protocol {protocol})")
        try:
            environment = self.install()
        except UpdateError as error:
            self.last_failure = str(error)
            if self.state is not None:
                self.state.note(f"self-update failed, retried hourly: {error}")
            self._next_attempt = self._clock() + RETRY_SECONDS
            log.error(
                "self-update failed, this worker (protocol %d) keeps running: %s;"
                " trying again in %.0f minutes",
                WORKER_VERSION, error, RETRY_SECONDS / 60,
            )  # fmt: skip
            return
        log.info("updated: now running the worker in %s", environment)
        raise RestartWorker(python_of(environment))

    def _pin_server_key(self) -> None:
        """Trust the key the server announces now, unless one is trusted already.
        Tried once a process: a failure here is met again, and said, by an update."""
        self._pinned = True
        if self.key.get() is not None:
            return
        try:
            check_transport(self.client.server, self.trust)
            self.key.pin(self._package_info().public_key)
        except UpdateError as error:
            log.info("the server's package signing key is not pinned yet: %s", error)

    def install(self) -> Path:
        """Download, check, install and switch; the new environment."""
        check_transport(self.client.server, self.trust)
        info = self._package_info()
        verify(info.statement(), info.public_key, info.signature, self.key.pin(info.public_key))
        if info.protocol <= WORKER_VERSION:
            raise UpdateError(
                f"the server's worker package speaks protocol {info.protocol},"
                f" no newer than this worker's {WORKER_VERSION}"
            )
        data = self._download(info)
        self.envs.mkdir(parents=True, exist_ok=True)
        prune(self.envs)
        environment = self.envs / info.environment_name
        if environment.exists():  # a partial one, or one that was never made current
            shutil.rmtree(environment)
        wheel = self.envs / info.filename
        wheel.write_bytes(data)
        try:
            _create_environment(environment, wheel, self.stop)
        finally:
            wheel.unlink(missing_ok=True)
        installed = _protocol_of(environment)
        if installed != info.protocol:
            raise UpdateError(
                f"the installed worker speaks protocol {installed}, not {info.protocol}"
            )
        _write_marker(environment, info)
        make_current(self.envs, environment)
        return environment

    def _package_info(self) -> PackageInfo:
        try:
            return PackageInfo.parse(self.client.get_json(PACKAGE_INFO_PATH))
        except UpdateError:
            raise
        except WorkerError as error:
            raise UpdateError(f"cannot read the package description: {error}") from None

    def _download(self, info: PackageInfo) -> bytes:
        try:
            data = self.client.get(PACKAGE_PATH)
        except WorkerError as error:
            raise UpdateError(f"cannot download the package: {error}") from None
        if len(data) != info.size:
            raise UpdateError(
                f"the download has {len(data)} bytes, the server announced {info.size}: refused"
            )
        digest = hashlib.sha256(data).hexdigest()
        if digest != info.sha256:
            raise UpdateError(
                f"the download's sha256 is {digest}, the server announced {info.sha256}: refused"
            )
        return data


def _run(command: list[str], what: str, stop: threading.Event | None = None) -> str:
    """Run one step; its output. Ended early when the worker is told to stop
    (a SIGTERM must not wait for pip) or after STEP_TIMEOUT."""
    try:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter, fixed arguments
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    except OSError as error:
        raise UpdateError(f"{what}: {error}") from None
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        try:
            output, errors = process.communicate(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            stopping = stop is not None and stop.is_set()
            if stopping or time.monotonic() > deadline:
                process.kill()
                process.communicate()
                reason = "the worker is stopping" if stopping else f"over {STEP_TIMEOUT:.0f} s"
                raise UpdateError(f"{what}: interrupted, {reason}") from None
    if process.returncode != 0:
        tail = (output + errors).strip().splitlines()[-5:]
        raise UpdateError(f"{what} failed (status {process.returncode}): {' / '.join(tail)}")
    return output


def _create_environment(environment: Path, wheel: Path, stop: threading.Event | None) -> None:
    """A fresh virtual environment holding the wheel and its dependencies
    (from pip's configured index, as when the worker was first installed)."""
    _run([sys.executable, "-m", "venv", str(environment)], "creating the environment", stop)
    pip = [str(python_of(environment)), "-m", "pip", "install", "--disable-pip-version-check"]
    _run([*pip, "--no-input", str(wheel)], "pip install", stop)


def _protocol_of(environment: Path) -> int:
    script = (
        "import arbiter.worker.cli\n"
        "from arbiter.protocol import WORKER_VERSION\n"
        "print(WORKER_VERSION)"
    )
    output = _run([str(python_of(environment)), "-I", "-c", script], "checking the new worker")
    try:
        return int(output.strip())
    except ValueError:
        raise UpdateError(f"the new worker gave no protocol: {output[:100]!r}") from None


def _write_marker(environment: Path, info: PackageInfo) -> None:
    marker = {"version": info.version, "protocol": info.protocol, "sha256": info.sha256}
    staging = environment / f"{MARKER}.tmp"
    staging.write_text(json.dumps(marker), encoding="utf-8")
    staging.replace(environment / MARKER)


def make_current(envs: Path, environment: Path) -> None:
    """Point `envs/current` at `environment` with one rename (atomic)."""
    staging = envs / f".{CURRENT_LINK}.{os.getpid()}"
    staging.unlink(missing_ok=True)
    staging.symlink_to(environment.name)
    staging.replace(envs / CURRENT_LINK)
    descriptor = os.open(envs, os.O_RDONLY)
    try:
        os.fsync(descriptor)  # the rename survives a power cut
    finally:
        os.close(descriptor)


def prune(envs: Path) -> None:
    """Remove what no worker runs: partial environments, stale links, wheels;
    never the current environment nor the one this process runs from."""
    keep = {_resolved(envs / CURRENT_LINK), Path(sys.prefix).resolve()}
    for entry in envs.iterdir():
        if entry.name == CURRENT_LINK:
            continue
        if entry.is_symlink() or entry.is_file():
            entry.unlink(missing_ok=True)
        elif entry.resolve() not in keep:
            shutil.rmtree(entry, ignore_errors=True)


def _resolved(path: Path) -> Path | None:
    return path.resolve() if path.exists() else None


def current_worker(data_dir: Path) -> tuple[Path, int] | None:
    """The environment `envs/current` names and its protocol, if it holds a
    worker newer than this one that this process is not already running."""
    current = data_dir / ENVS_DIR / CURRENT_LINK
    if not current.exists():
        return None
    target = current.resolve()
    if target == Path(sys.prefix).resolve():
        return None
    try:
        marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    protocol = marker.get("protocol") if isinstance(marker, dict) else None
    if not isinstance(protocol, int) or protocol <= WORKER_VERSION:
        return None
    if not python_of(target).exists():
        return None
    return target, protocol


def describe_running() -> str:
    return f"arbiter worker {__version__} (protocol {WORKER_VERSION}) in {sys.prefix}"
