"""`arbiter worker` and `arbiter demo`: starting the worker.

Imported by arbiter.cli only when one of these commands runs (their flags
are in arguments.py, which imports nothing heavy). Setting up a
worker: take the directory lock, merge the flags into the configuration file,
check the credentials with request_version, then hand over to the main loop.
"""

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from arbiter.protocol.workers import short_worker_name
from arbiter.worker.arguments import CONFIG_NAME, TOKEN_VARIABLE
from arbiter.worker.client import ApiClient
from arbiter.worker.config import (
    DEFAULT_DATA_DIR,
    apply_flags,
    read_file,
    resolve,
    write_file,
)
from arbiter.worker.control import Control
from arbiter.worker.engines import EngineCache
from arbiter.worker.errors import ConfigError, CredentialsError, WorkerError
from arbiter.worker.gitsource import policy_from_env
from arbiter.worker.heartbeat import Heartbeat
from arbiter.worker.host import find_compiler, this_machine, worker_arch
from arbiter.worker.identity import make_worker_info, new_unique_key
from arbiter.worker.integrity import check_installation
from arbiter.worker.loop import directory_lock, run_loop
from arbiter.worker.package_trust import UpdateTrust
from arbiter.worker.state import StateFile, read_state, worker_running
from arbiter.worker.state import describe as describe_state
from arbiter.worker.status import StatusLine, setup_logging
from arbiter.worker.task import TaskContext
from arbiter.worker.update import (
    RestartWorker,
    SelfUpdate,
    current_worker,
    describe_running,
    python_of,
    restart,
)

log = logging.getLogger("arbiter.worker")

# Flag (argparse destination) -> the configuration key it is saved under.
STORED_FLAGS = {
    "server": "server",
    "username": "username",
    "password": "password",
    "token": "password",
    "token_file": "token_file",
    "concurrency": "concurrency",
    "max_memory": "max_memory",
    "min_threads": "min_threads",
    "uuid_prefix": "uuid_prefix",
    "fleet": "fleet",
    "compiler": "compiler",
    "server_key": "server_key",
    "allow_http_updates": "allow_http_updates",
}


def worker_command(args: argparse.Namespace) -> int:
    action = getattr(args, "worker_action", None)
    if action == "status":
        return status_command(args)
    if action == "install-service":
        return install_service_command(args)
    data_dir = Path(args.data_dir or DEFAULT_DATA_DIR).absolute()
    try:
        with directory_lock(data_dir):
            return _start(args, data_dir)
    except ConfigError as error:
        print(f"arbiter worker: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except RestartWorker as switch:  # the directory lock is released: the new worker takes it
        try:
            restart(switch.python, data_dir, _restart_environment(args))
        except OSError as error:  # the new worker was run once before the switch: rare
            print(f"arbiter worker: cannot start {switch.python}: {error}", file=sys.stderr)
        return 1


def _flags(args: argparse.Namespace) -> dict[str, str | None]:
    flags: dict[str, str | None] = {}
    for attribute, key in STORED_FLAGS.items():
        value = getattr(args, attribute, None)
        if isinstance(value, bool):
            value = "true" if value else "false"
        if value is not None:
            flags[key] = str(value)
    # One saved credential at a time: a token file replaces a saved secret (which
    # then leaves worker.ini), and a password or token replaces a token file.
    if args.token_file is not None:
        flags["token_file"] = str(Path(args.token_file).absolute())
        flags["password"] = ""
    elif "password" in flags:
        flags["token_file"] = ""
    return flags


def _restart_environment(args: argparse.Namespace) -> dict[str, str]:
    """The environment to re-execute in. The new worker gets no credential flag
    (worker.ini has it), so a token in the environment, which a credential on
    this command line overrode, must not override it there."""
    environment = dict(os.environ)
    if any(value is not None for value in (args.password, args.token, args.token_file)):
        environment.pop(TOKEN_VARIABLE, None)
    return environment


def _env_token(args: argparse.Namespace) -> str:
    """ARBITER_WORKER_TOKEN, unless a credential was given on the command line."""
    given = (args.password, args.token, args.token_file)
    return "" if any(value is not None for value in given) else os.environ.get(TOKEN_VARIABLE, "")


def _start(args: argparse.Namespace, data_dir: Path) -> int:
    config_path = data_dir / CONFIG_NAME
    parser = read_file(config_path)
    apply_flags(parser, _flags(args))
    write_file(config_path, parser)
    config, notes = resolve(parser, this_machine(), data_dir, env_token=_env_token(args))
    status = StatusLine()
    setup_logging(data_dir, status)
    log.info("%s, pid %d", describe_running(), os.getpid())
    if config.self_update and (newer := current_worker(data_dir)) is not None:
        environment, protocol = newer
        log.info("switching to the updated worker (protocol %d) in %s", protocol, environment)
        raise RestartWorker(python_of(environment))
    for note in notes:
        log.info(note)
    compiler = find_compiler(config.compiler)
    if compiler is None and config.compiler:
        raise ConfigError(f"compiler: {config.compiler} is not usable on this machine")
    unique_key = new_unique_key(config.uuid_prefix)
    modified, files_note = check_installation()
    log.info(files_note)
    info = make_worker_info(config, compiler, unique_key, worker_arch(), modified=modified)
    client = ApiClient(config.server, config.password, info)
    machine = short_worker_name(config.username, config.concurrency, unique_key)
    state = StateFile(data_dir, server=config.server, machine=machine)
    state.activity("checking the credentials")
    try:
        if not _credentials_ok(client):
            state.stopped("the server refused the credentials")
            state.activity("stopped (exit status 1)")
            return 1
        compiled = f"{compiler.name} {'.'.join(map(str, compiler.version))}" if compiler else "none"
        log.info(
            "worker %s: %d cores, %d MiB, compiler %s; server %s",
            unique_key, config.concurrency, config.max_memory, compiled, config.server,
        )  # fmt: skip
        log.info("this machine on the server: %s/workers/%s", config.server, machine)
        policy = policy_from_env(os.environ)  # ARBITER_WORKER_GIT_ALLOW, ..._SSH
        control = Control()
        context = TaskContext(
            client=client,
            config=config,
            engines=EngineCache(data_dir / "engines", compiler, config.concurrency, policy=policy),
            control=control,
            status=status,
            books_dir=data_dir / "books",
            nets_dir=data_dir / "nets",
            updater=SelfUpdate(
                client,
                data_dir,
                enabled=config.self_update,
                state=state,
                stop=control.stopping,
                trust=UpdateTrust(config.server_key, config.allow_http_updates),
            ),
            state=state,
        )
        code = _run(context)
        state.activity(f"stopped (exit status {code})")
        return code
    finally:
        client.close()
        status.done()


def _run(context: TaskContext) -> int:
    """The main loop with its signal handlers and heartbeat thread."""
    _install_signal_handlers(context.control)
    heartbeat = Heartbeat(context.client, context.control)
    heartbeat.start()
    try:
        return run_loop(context, fleet=context.config.fleet)
    finally:
        heartbeat.stop()


def _credentials_ok(client: ApiClient) -> bool:
    """Check the credentials once at start. An unreachable server is not fatal
    (the loop retries); a refusal is, with the server's own words."""
    try:
        client.request_version()
    except CredentialsError as error:
        print(f"arbiter worker: the server refused the credentials: {error}", file=sys.stderr)
        print("Check --username and --password/--token.", file=sys.stderr)
        return False
    except WorkerError as error:
        log.warning("cannot reach the server yet (%s); will keep trying", error)
    return True


def _install_signal_handlers(control: Control) -> None:
    """First SIGINT/SIGTERM: finish the report, close the task, exit. Second: now."""

    def handle(number: int, _frame: FrameType | None) -> None:
        # Runs in the main thread between two bytecodes: it only sets flags (no
        # logging, whose locks the interrupted code may hold); the loop logs.
        if control.stopping.is_set():
            raise KeyboardInterrupt
        control.request_stop(signal.Signals(number).name)

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)


def status_command(args: argparse.Namespace) -> int:
    """0: a worker is running; 3: none is (its last state is shown); 2: no state file."""
    data_dir = Path(args.data_dir or DEFAULT_DATA_DIR).absolute()
    document = read_state(data_dir)
    if document is None:
        print(f"arbiter worker status: no worker state in {data_dir}", file=sys.stderr)
        return 2
    running = worker_running(data_dir)
    if args.json:
        print(json.dumps({**document, "running": running}, indent=2))
    else:
        print("\n".join(describe_state(document, running=running, now=time.time())))
    return 0 if running else 3


def install_service_command(args: argparse.Namespace) -> int:
    from arbiter.worker import service

    data_dir = Path(args.data_dir or DEFAULT_DATA_DIR).absolute()
    options = service.ServiceOptions(data_dir=data_dir, system=args.system, name=args.name)
    try:
        service.check_settings(data_dir, args.token_file)
        path = service.install(options, Path(args.output).absolute() if args.output else None)
    except ConfigError as error:
        print(f"arbiter worker install-service: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path}; to start the worker now and at every boot:")
    for step in service.next_steps(options, path):
        print(f"  {step}")
    return 0


def sample_engine_command(args: argparse.Namespace) -> int:
    """`arbiter sample-engine DIR`: the demo's engine repository, for a first test."""
    from arbiter.worker.sample_engine import BASE_NODES, make_sample_repo, usable_stockfish

    real = usable_stockfish("sample-engine")
    if real is None:
        return 1
    path = Path(args.dir).absolute()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        print(f"arbiter sample-engine: {path} exists and is not empty", file=sys.stderr)
        return 2
    repo = make_sample_repo(path, real)
    print(f"Sample engine repository: {repo.url}")
    print(
        f"On New test: Tests repository {repo.url}, Test branch {repo.new_branch}, Base branch"
        f" {repo.base_branch}, Time control N={BASE_NODES} (fixed nodes: any machine can play"
        " it), Stop rule: Fixed number of games, Number of games 200."
    )
    return 0


def demo_command(args: argparse.Namespace) -> int:
    from arbiter.worker.demo import run_demo

    return run_demo(port=args.port, directory=args.dir, exit_when_done=args.exit)
