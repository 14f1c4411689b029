"""`arbiter worker install-service`: a systemd unit that runs this worker.

The unit runs `python -I -m arbiter worker --data-dir D` with the
interpreter and the code that ran this command, so every setting comes from D's
worker.ini and the token from the 0600 file worker.ini names, never from the
command line or the unit. It restarts the worker when it fails, with a
growing delay where systemd can (RestartSteps, systemd 254 and later; a
fixed minute before), but not after exit status 2 (a setting to fix by hand).
It stops the worker with SIGTERM, which ends the games, sends the last
report, uploads the PGN and hands the task back, and allows that two
minutes (update_task's own retries take 75 s) before systemd kills what is
left. After a self-update the worker switches to its new environment by
itself at start, so the unit never needs rewriting.
"""

import getpass
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from arbiter.worker.arguments import CONFIG_NAME
from arbiter.worker.config import apply_flags, read_file, read_token_file, resolve, write_file
from arbiter.worker.errors import ConfigError
from arbiter.worker.host import this_machine

UNIT_NAME = "arbiter-worker"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
STOP_SECONDS = 120  # SIGTERM to SIGKILL
RESTART_SECONDS = 15  # the first restart's delay
RESTART_MAX = "15min"  # the longest, reached in RESTART_STEPS steps
RESTART_STEPS = 8
FIXED_RESTART_SECONDS = 60  # without RestartSteps
STEPS_SINCE = 254  # the systemd version that knows RestartSteps and RestartMaxDelaySec


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    data_dir: Path
    system: bool  # a system unit (User= this user) rather than a user unit
    name: str = UNIT_NAME
    python: Path = Path(sys.executable)
    run_as: str = ""  # system units: the account; default the invoking one
    systemd_version: int | None = None  # None: ask systemctl


def unit_path(options: ServiceOptions) -> Path:
    if options.system:
        return SYSTEM_UNIT_DIR / f"{options.name}.service"
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config_home / "systemd" / "user" / f"{options.name}.service"


def systemd_version() -> int | None:
    """The installed systemd's version (`systemctl --version`), None if unknown."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None
    try:
        output = subprocess.run(  # noqa: S603 - a fixed command
            [systemctl, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"systemd (\d+)", output)
    return int(found.group(1)) if found else None


def invoking_user() -> str:
    """The account the worker runs as: the one behind sudo, if any."""
    return os.environ.get("SUDO_USER") or getpass.getuser()


def check_settings(data_dir: Path, token_file: str | None) -> None:
    """The worker must start unattended from worker.ini with a token file;
    `token_file` (given with install-service) is checked and saved there."""
    config_path = data_dir / CONFIG_NAME
    if not config_path.exists():
        raise ConfigError(
            f"{config_path} does not exist: run `arbiter worker --data-dir {data_dir}` once"
            " with --server, --username and --token-file first"
        )
    parser = read_file(config_path)
    if token_file is not None:
        path = Path(token_file).absolute()
        read_token_file(path)  # refused if others may read it
        apply_flags(parser, {"token_file": str(path), "password": ""})
        write_file(config_path, parser)
    if not parser.get("login", "token_file").strip():
        raise ConfigError(
            "token_file: the service reads the token from a file (mode 0600), never from the"
            " command line: give --token-file PATH"
        )
    resolve(parser, this_machine(), data_dir)  # every other setting must be usable too


def python_launch(python: Path) -> tuple[list[str], str]:
    """How the unit starts this worker's code: isolated (`-I`: no PYTHONPATH, no
    user site, no working directory) when `python -I` finds the very `arbiter`
    running now, as in a virtual environment; else as it runs now, with its
    PYTHONPATH (made absolute) in the unit. Returns (interpreter options, PYTHONPATH)."""
    import arbiter

    script = "import arbiter; print(arbiter.__file__)"
    try:
        found = subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
            [str(python), "-I", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        found = ""
    if found and Path(found).resolve() == Path(arbiter.__file__).resolve():
        return ["-I"], ""
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return [], os.pathsep.join(str(Path(entry).absolute()) for entry in entries)


def unit_text(
    options: ServiceOptions, version: int | None, launch: tuple[list[str], str] = (["-I"], "")
) -> str:
    data_dir = options.data_dir
    flags, python_path = launch
    command = [str(options.python), *flags, "-m", "arbiter", "worker", "--data-dir", str(data_dir)]
    environment = [f"Environment={_quote('PYTHONPATH=' + python_path)}"] if python_path else []
    if version is not None and version >= STEPS_SINCE:
        restart = [
            f"RestartSec={RESTART_SECONDS}s",
            f"RestartSteps={RESTART_STEPS}",
            f"RestartMaxDelaySec={RESTART_MAX}",
        ]
    else:
        restart = [f"RestartSec={FIXED_RESTART_SECONDS}s"]
    account = [f"User={options.run_as or invoking_user()}"] if options.system else []
    lines = [
        "# Written by `arbiter worker install-service`; see docs/worker.md.",
        "[Unit]",
        f"Description=Arbiter worker ({_escape(str(data_dir))})",
        "Wants=network-online.target",
        "After=network-online.target",
        "# Never give up restarting: the delay between restarts grows instead.",
        "StartLimitIntervalSec=0",
        "",
        "[Service]",
        "Type=exec",
        *account,
        *environment,
        "ExecStart=" + " ".join(_quote(part) for part in command),
        f"WorkingDirectory={_escape(str(data_dir))}",
        "Restart=on-failure",
        *restart,
        "# Exit status 2 is a setting to fix by hand: restarting would not help.",
        "RestartPreventExitStatus=2",
        "# SIGTERM: the worker reports its games, hands its task back and exits.",
        "KillSignal=SIGTERM",
        "KillMode=mixed",
        f"TimeoutStopSec={STOP_SECONDS}s",
        "",
        "[Install]",
        f"WantedBy={'multi-user.target' if options.system else 'default.target'}",
    ]
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    """A value systemd reads literally: `%` starts a specifier, `$` a variable."""
    return text.replace("%", "%%").replace("$", "$$")


def _quote(argument: str) -> str:
    escaped = _escape(argument)
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./$-]+", escaped):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def install(options: ServiceOptions, output: Path | None) -> Path:
    """Write the unit (atomically) where systemd looks, or at `output`."""
    version = options.systemd_version or systemd_version()
    path = output or unit_path(options)
    text = unit_text(options, version, python_launch(options.python))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.tmp")
        staging.write_text(text, encoding="utf-8")
        staging.replace(path)
    except OSError as error:
        hint = (
            " (a system unit: run with sudo, or write it with --output)" if options.system else ""
        )
        raise ConfigError(f"cannot write {path}: {error.strerror}{hint}") from None
    return path


def next_steps(options: ServiceOptions, path: Path) -> list[str]:
    scope = "" if options.system else " --user"
    sudo = "sudo " if options.system else ""
    steps = []
    if path != unit_path(options):
        steps.append(f"{sudo}cp {path} {unit_path(options)}")
    steps += [
        f"{sudo}systemctl{scope} daemon-reload",
        f"{sudo}systemctl{scope} enable --now {options.name}",
    ]
    if not options.system:
        steps.append(f"loginctl enable-linger {invoking_user()}   # start at boot, without a login")
    return steps
