"""Self-update end to end: a worker wheel of an older protocol, installed by
pip into a real virtual environment, against a real server that publishes
the current worker. Everything pip needs comes from a local wheelhouse.
Then the updater's decisions, against the worker tests' scripted server."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from arbiter import __version__
from arbiter.domain.files.worker_package import public_key_of, signing_key
from arbiter.protocol import WORKER_VERSION
from arbiter.protocol.packages import encode_key, package_statement
from arbiter.worker.package_trust import PIN_FILE, UpdateTrust, check_transport
from arbiter.worker.sample_engine import SampleRepo
from arbiter.worker.state import StateFile, read_state
from arbiter.worker.update import (
    CURRENT_LINK,
    ENVS_DIR,
    MARKER,
    MAX_PACKAGE_BYTES,
    PACKAGE_INFO_PATH,
    PACKAGE_PATH,
    RETRY_SECONDS,
    PackageInfo,
    SelfUpdate,
    UpdateError,
    current_worker,
    make_current,
    prune,
)
from arbiter.worker.update import _run as run_step
from tests.once import built_once
from tests.web.live_server import start_server, stop
from tests.worker.e2e import Accounts, Arena, arena, games, get_run, wait_for
from tests.worker.fakes import FakeServer
from tests.worker.wheels import (
    make_environment,
    make_wheelhouse,
    offline_pip,
    older_worker_wheel,
)

OLD_VERSION = "0.0.9"
OLD_PROTOCOL = WORKER_VERSION - 1
TC = "N=320000"


@dataclass(frozen=True)
class OldWorker:
    python: Path  # of the environment the older worker was installed into
    wheelhouse: Path
    source: Path  # the older code, server included: a PYTHONPATH entry


@pytest.fixture(scope="session")
def old_worker(shared_dir: Path) -> OldWorker:
    """Built once for every test process of the run: a wheelhouse, a wheel and a
    virtual environment take about 15 s."""
    directory = shared_dir / "old-worker"
    with built_once(directory) as needed:
        if needed:
            wheelhouse = make_wheelhouse(directory / "wheelhouse")
            build = directory / "build"
            wheel = older_worker_wheel(build, version=OLD_VERSION, protocol=OLD_PROTOCOL)
            make_environment(directory / "env", wheel.path, wheelhouse)
    python = directory / "env" / "bin" / "python"
    return OldWorker(python, directory / "wheelhouse", directory / "build" / "source")


@dataclass
class Started:
    process: subprocess.Popen[bytes]
    data_dir: Path
    output: Path

    def file_log(self) -> str:
        return (self.data_dir / "worker.log").read_text()

    def log(self) -> str:
        worker_log = self.data_dir / "worker.log"
        text = self.output.read_text()
        return text + (worker_log.read_text() if worker_log.exists() else "")

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            message = f"the worker did not finish in {timeout} s:\n{self.log()}"
            raise AssertionError(message) from None


def start_old_worker(old: OldWorker, place: Arena, name: str, *extra: str) -> Started:
    """The older worker as a volunteer runs it: its token in a 0600 file."""
    data_dir = place.directory / name
    token_file = place.directory / f"{name}.token"
    if not token_file.exists():
        token_file.write_text(place.accounts.alice)
        token_file.chmod(0o600)
    command = [
        str(old.python), "-m", "arbiter", "worker",
        "--server", place.server.url,
        "--username", "alice",
        "--token-file", str(token_file),
        "--data-dir", str(data_dir),
        "--uuid-prefix", name,
        "--concurrency", "1",
        *extra,
    ]  # fmt: skip
    output = place.directory / f"{name}.out"
    with output.open("ab") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=offline_pip(old.wheelhouse),
            start_new_session=True,  # its pip and venv children are killed with it
        )
    return Started(process, data_dir, output)


def started_lines(log: str) -> list[tuple[str, int, int]]:
    """(version, protocol, pid) of each start the worker logged."""
    pattern = r"arbiter worker (\S+) \(protocol (\d+)\) in \S+, pid (\d+)"
    return [(v, int(p), int(pid)) for v, p, pid in re.findall(pattern, log)]


def test_an_older_worker_updates_itself_and_plays_on(
    accounts: Accounts, sample_repo: SampleRepo, old_worker: OldWorker, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        run_id = place.submit(sample_repo.url, tc=TC, num_games=8)
        worker = start_old_worker(old_worker, place, "old", "--fleet")
        assert worker.wait(300) == 0, worker.log()
        log = worker.log()
        starts = started_lines(worker.file_log())
        # The same process (exec keeps the pid) first ran the old worker, then the new one.
        assert [(v, p) for v, p, _ in starts] == [
            (OLD_VERSION, OLD_PROTOCOL),
            (__version__, WORKER_VERSION),
        ], log
        assert starts[0][2] == starts[1][2] == worker.process.pid
        current = worker.data_dir / ENVS_DIR / CURRENT_LINK
        assert current.is_symlink()
        assert (current / MARKER).exists()
        run = get_run(place.server, run_id)
        assert run["finished"], log
        assert games(run["results"]) == 8


def finished(worker: Started, server: str, run_id: str) -> bool:
    """Whether the run is finished; fails at once if the worker died."""
    assert worker.process.poll() is None, worker.log()
    return bool(httpx.get(f"{server}/api/get_run/{run_id}").json()["finished"])


def test_a_worker_keeps_playing_when_its_server_is_upgraded(
    accounts: Accounts, sample_repo: SampleRepo, old_worker: OldWorker, tmp_path: Path
) -> None:
    """The issue's "done when": nobody touches the volunteer's machine."""
    data = tmp_path / "server"
    shutil.copytree(accounts.data, data)
    old_server = start_server(data, extra_env={"PYTHONPATH": str(old_worker.source)})
    port = old_server.port
    place = Arena(old_server, accounts, tmp_path)
    worker: Started | None = None
    try:
        assert httpx.get(f"{old_server.url}/api/worker/package.json").json()["protocol"] == (
            OLD_PROTOCOL
        )
        first = place.submit(sample_repo.url, tc=TC, num_games=4)
        worker = start_old_worker(old_worker, place, "fleetv")  # not --fleet: it waits
        wait_for(lambda: finished(worker, old_server.url, first), 120, "the first run played")
        stop(old_server)
        place.server = start_server(data, port=port)  # the upgrade: same address, same data
        second = place.submit(sample_repo.url, tc=TC, num_games=4)
        wait_for(lambda: finished(worker, place.server.url, second), 240, "the second run played")
        assert worker.process.poll() is None, worker.log()
        worker.process.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.log()
    finally:
        if worker is not None and worker.process.poll() is None:
            os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()
        stop(place.server)
    starts = started_lines(worker.file_log())
    assert [(v, p) for v, p, _ in starts] == [
        (OLD_VERSION, OLD_PROTOCOL),
        (__version__, WORKER_VERSION),
    ], worker.log()
    assert len({pid for _, _, pid in starts}) == 1


def test_a_corrupted_download_is_refused_and_the_old_worker_runs_on(
    accounts: Accounts, old_worker: OldWorker, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        (wheel,) = (tmp_path / "server" / "worker-package").glob("*.whl")
        data = bytearray(wheel.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size, other bytes: as a bad disk or proxy would
        wheel.write_bytes(bytes(data))
        worker = start_old_worker(old_worker, place, "wary", "--fleet")
        assert worker.wait(120) == 0, worker.log()
        log = worker.log()
        assert "sha256" in log
        assert "refused" in log
        assert "keeps running" in log
        assert [p for _, p, _ in started_lines(worker.file_log())] == [OLD_PROTOCOL]
        assert not (worker.data_dir / ENVS_DIR / CURRENT_LINK).exists()
        assert "the server has no task for this worker: exiting" in log


def test_an_update_killed_midway_leaves_a_worker_that_updates_next_time(
    accounts: Accounts, old_worker: OldWorker, tmp_path: Path
) -> None:
    with arena(accounts, tmp_path) as place:
        worker = start_old_worker(old_worker, place, "killed", "--fleet")
        envs = worker.data_dir / ENVS_DIR

        def installing() -> bool:
            return envs.exists() and any(entry.is_dir() for entry in envs.iterdir())

        wait_for(installing, 60, "the new environment being made")
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait()
        assert not (envs / CURRENT_LINK).exists()

        again = start_old_worker(old_worker, place, "killed", "--fleet")
        assert again.wait(300) == 0, again.log()
        log = again.log()
        assert [p for _, p, _ in started_lines(again.file_log())][-2:] == [
            OLD_PROTOCOL,
            WORKER_VERSION,
        ], log
        assert (envs / CURRENT_LINK).is_symlink()
        left = sorted(entry.name for entry in envs.iterdir())
        assert len(left) == 2, left  # the current link and its environment: the partial one is gone


# ---------------------------------------------------------------- without a server process


SERVER_KEY = signing_key(bytes(range(32)))
OTHER_KEY = signing_key(bytes(range(1, 33)))
HTTP = UpdateTrust(allow_http=True)  # the scripted server's address is http://arbiter.test


def package_info(key: Ed25519PrivateKey | None = SERVER_KEY, **changes: Any) -> dict[str, Any]:
    """A package description as the server publishes it, signed by `key`
    (None: unsigned, as an older server's)."""
    info: dict[str, Any] = {
        "version": "0.2.0",
        "protocol": WORKER_VERSION + 1,
        "filename": "arbiter_worker-0.2.0-py3-none-any.whl",
        "sha256": "0" * 64,
        "size": 1000,
        **changes,
    }
    if key is not None:
        statement = package_statement(
            info["filename"], info["version"], info["protocol"], info["sha256"], info["size"]
        )
        info["public_key"] = public_key_of(key)
        info["signature"] = encode_key(key.sign(statement))
    return info


def test_a_worker_installed_from_the_servers_wheel_checks_its_files(old_worker: OldWorker) -> None:
    """pip's record of the installed wheel holds every module's hash: the
    installed worker reports itself unmodified (and would report an edit)."""
    check = "from arbiter.worker.integrity import check_installation; print(check_installation())"
    answer = subprocess.run(
        [str(old_worker.python), "-c", check], capture_output=True, text=True, check=True
    ).stdout
    assert answer.strip() == "(False, 'worker files: as installed')"


@pytest.mark.parametrize(
    "changes",
    [
        {"filename": "../../bin/evil.whl"},
        {"filename": "arbiter_worker.tar.gz"},
        {"sha256": "xyz"},
        {"size": 0},
        {"size": MAX_PACKAGE_BYTES + 1},
        {"protocol": "326"},
        {"version": "1.0; rm -rf"},
    ],
)
def test_a_package_description_that_cannot_be_trusted_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(UpdateError):
        PackageInfo.parse(package_info(**changes))


def test_self_update_off_only_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = FakeServer()
    updater = SelfUpdate(server.client(), tmp_path, enabled=False)
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert server.paths() == []
    assert "self_update is off" in caplog.text


def test_a_failed_update_is_tried_again_an_hour_later(tmp_path: Path) -> None:
    server = FakeServer()
    server.files[PACKAGE_INFO_PATH] = json.dumps(package_info()).encode()
    server.files[PACKAGE_PATH] = b"x" * 999  # one byte short
    now = [0.0]
    state = StateFile(tmp_path, server="http://arbiter.test", machine="alice-1cores-ab")
    updater = SelfUpdate(
        server.client(), tmp_path, enabled=True, state=state, clock=lambda: now[0], trust=HTTP
    )
    updater.on_server_protocol(WORKER_VERSION + 1)  # returns: the worker runs on
    assert "999 bytes, the server announced 1000: refused" in updater.last_failure
    document = read_state(tmp_path)
    assert document is not None
    assert "self-update failed" in document["note"]
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert server.paths() == [PACKAGE_INFO_PATH, PACKAGE_PATH]  # not again at once
    now[0] = RETRY_SECONDS
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert len(server.paths()) == 4
    assert not (tmp_path / ENVS_DIR / CURRENT_LINK).exists()
    updater.on_server_protocol(WORKER_VERSION)  # not newer: nothing to do
    assert len(server.paths()) == 4


def test_a_package_no_newer_than_this_worker_is_not_installed(tmp_path: Path) -> None:
    server = FakeServer()
    server.files[PACKAGE_INFO_PATH] = json.dumps(package_info(protocol=WORKER_VERSION)).encode()
    updater = SelfUpdate(server.client(), tmp_path, enabled=True, trust=HTTP)
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert "no newer than this worker's" in updater.last_failure
    assert server.paths() == [PACKAGE_INFO_PATH]


def fake_environment(envs: Path, name: str, protocol: int | None) -> Path:
    environment = envs / name
    (environment / "bin").mkdir(parents=True)
    (environment / "bin" / "python").touch()
    if protocol is not None:
        (environment / MARKER).write_text(json.dumps({"protocol": protocol}))
    return environment


def test_the_switch_and_the_clean_up(tmp_path: Path) -> None:
    envs = tmp_path / ENVS_DIR
    old = fake_environment(envs, "old", WORKER_VERSION + 1)
    new = fake_environment(envs, "new", WORKER_VERSION + 2)
    partial = fake_environment(envs, "partial", None)
    make_current(envs, old)
    assert current_worker(tmp_path) == (old, WORKER_VERSION + 1)
    make_current(envs, new)  # replaces the link in one rename
    assert (envs / CURRENT_LINK).resolve() == new
    assert current_worker(tmp_path) == (new, WORKER_VERSION + 2)
    (envs / "stale.whl").write_bytes(b"")
    prune(envs)
    assert sorted(entry.name for entry in envs.iterdir()) == [CURRENT_LINK, "new"]
    assert not old.exists()
    assert not partial.exists()


def test_a_current_worker_no_newer_than_this_one_is_not_switched_to(tmp_path: Path) -> None:
    envs = tmp_path / ENVS_DIR
    assert current_worker(tmp_path) is None
    make_current(envs, fake_environment(envs, "same", WORKER_VERSION))
    assert current_worker(tmp_path) is None  # a volunteer upgraded by hand meanwhile
    make_current(envs, fake_environment(envs, "unfinished", None))
    assert current_worker(tmp_path) is None


def test_a_stopping_worker_does_not_wait_for_pip() -> None:
    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    with pytest.raises(UpdateError, match="interrupted, the worker is stopping"):
        run_step([sys.executable, "-c", "import time; time.sleep(60)"], "pip install", stop)
    assert time.monotonic() - started < 10
    with pytest.raises(UpdateError, match=r"pip install failed \(status 3\): no index"):
        run_step(
            [sys.executable, "-c", "import sys; print('no index'); sys.exit(3)"], "pip install"
        )


# ---------------------------------------------------------------- signatures and transport


def updater_for(
    tmp_path: Path, info: dict[str, Any], trust: UpdateTrust = HTTP
) -> tuple[SelfUpdate, FakeServer]:
    server = FakeServer()
    server.files[PACKAGE_INFO_PATH] = json.dumps(info).encode()
    server.files[PACKAGE_PATH] = b"x" * 999  # never reached by a refused package
    return SelfUpdate(server.client(), tmp_path, enabled=True, trust=trust), server


def test_the_first_answer_pins_the_servers_key(tmp_path: Path) -> None:
    updater, server = updater_for(tmp_path, package_info(protocol=WORKER_VERSION))
    updater.on_server_protocol(WORKER_VERSION)
    updater.on_server_protocol(WORKER_VERSION)
    assert server.paths() == [PACKAGE_INFO_PATH]  # once
    assert (tmp_path / PIN_FILE).read_text().strip() == public_key_of(SERVER_KEY)


@pytest.mark.parametrize(
    ("info", "refusal"),
    [
        (package_info(key=None), "package is not signed"),
        (package_info(key=OTHER_KEY), "this worker trusts"),
        ({**package_info(), "size": 999}, "signature does not verify"),
        ({**package_info(), "sha256": "1" * 64}, "signature does not verify"),
        (
            {**package_info(), "signature": package_info(key=OTHER_KEY)["signature"]},
            "does not verify",
        ),
    ],
)
def test_a_package_not_signed_by_the_pinned_key_is_refused_before_download(
    tmp_path: Path, info: dict[str, Any], refusal: str
) -> None:
    (tmp_path / PIN_FILE).write_text(public_key_of(SERVER_KEY) + "\n")
    updater, server = updater_for(tmp_path, info)
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert refusal in updater.last_failure
    assert server.paths() == [PACKAGE_INFO_PATH]  # nothing downloaded
    assert not (tmp_path / ENVS_DIR / CURRENT_LINK).exists()


def test_the_owners_key_is_trusted_over_any_announced_one(tmp_path: Path) -> None:
    trust = UpdateTrust(server_key=public_key_of(OTHER_KEY), allow_http=True)
    updater, _server = updater_for(tmp_path, package_info(), trust)
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert "this worker trusts" in updater.last_failure
    assert not (tmp_path / PIN_FILE).exists()


def test_an_unpinned_worker_pins_the_key_as_it_updates(tmp_path: Path) -> None:
    updater, server = updater_for(tmp_path, package_info())
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert "999 bytes, the server announced 1000" in updater.last_failure  # past the signature
    assert server.paths() == [PACKAGE_INFO_PATH, PACKAGE_PATH]
    assert (tmp_path / PIN_FILE).read_text().strip() == public_key_of(SERVER_KEY)


def test_plain_http_to_another_machine_is_refused_unless_allowed(tmp_path: Path) -> None:
    updater, server = updater_for(tmp_path, package_info(), UpdateTrust())
    updater.on_server_protocol(WORKER_VERSION + 1)
    assert "reached over plain http" in updater.last_failure
    assert server.paths() == []
    for server_url in ("https://arbiter.example.org", "http://127.0.0.1:8000", "http://[::1]:80"):
        check_transport(server_url, UpdateTrust())
    check_transport("http://arbiter.example.org", UpdateTrust(allow_http=True))
    with pytest.raises(UpdateError, match="allow_http_updates"):
        check_transport("http://10.0.0.5:8000", UpdateTrust())
