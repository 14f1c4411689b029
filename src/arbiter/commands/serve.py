"""`arbiter serve`: run one Arbiter process under uvicorn.

uvicorn settings follow the seeds: httptools + uvloop, a deep accept backlog
so reconnection bursts queue in the kernel, and never `limit_concurrency`
(it answers plain-text 503s; workers need JSON).
"""

import argparse
import errno
import logging
import os
import shutil
import socket
import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import FrameType

import uvicorn
from sqlalchemy.engine import make_url
from starlette.types import ASGIApp

from arbiter.runtime.bootstrap import check_files, open_database, settings_from_args
from arbiter.runtime.settings import Settings, SettingsError
from arbiter.storage import Storage, StorageError
from arbiter.storage.engine import is_sqlite, make_engine
from arbiter.storage.lease import PrimaryLease, primary_lease
from arbiter.web.app import create_app, require_single_process_on_primary
from arbiter.web.connection_limits import ConnectionLimits, protocol_class, raise_fd_limit
from arbiter.web.logs import JsonFormatter, configure_logging
from arbiter.web.standby import HolderWatch, read_mark, standby_app

BACKLOG = 16384
DEFAULT_LIMITS = ConnectionLimits()
STANDBY_POLL_SECONDS = 1.0  # how often a standby asks for the primary's lease
# A primary whose beat has not changed for this many lease checks is frozen:
# the standby ends its sessions and takes the lease.
LEASE_EXPIRY_CHECKS = 3

log = logging.getLogger("arbiter.serve")


class PortUnavailable(Exception):  # noqa: N818 - named for what happened
    """The address to serve on cannot be bound; the message says why."""


def arbiter_command() -> str:
    """How to run `arbiter` from here: the bare name when the shell finds it,
    else the script beside this interpreter (`.venv/bin/arbiter` after
    `bash scripts/serve`), shown relative to the current directory when below it."""
    if shutil.which("arbiter"):
        return "arbiter"
    script = Path(sys.executable).parent / "arbiter"
    if not script.exists():
        return f"{sys.executable} -m arbiter"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def banner_output(settings: Settings, text: str) -> str:
    """The banner as the logs are written: with ARBITER_LOG_FORMAT=json one JSON
    object (a record of `arbiter.serve`, shown whatever the log level), so a
    collector of JSON lines meets no other kind."""
    if settings.log_format != "json":
        return text
    record = logging.LogRecord("arbiter.serve", logging.INFO, __file__, 0, text, None, None)
    return JsonFormatter().format(record)


def banner(settings: Settings, database: str) -> str:
    """`database`: which database was opened and whether it was created just now."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host  # noqa: S104
    url = f"http://{host}:{settings.port}/"
    if settings.database_url:
        # Never print a database password to a terminal or a log.
        shown = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
        where = f"--database-url {shown}"
    else:
        where = f"--data-dir {settings.data_dir}"
    create = f"{arbiter_command()} users create NAME --approver --password-stdin {where}"
    return (
        f"Arbiter {settings.role} starting\n"
        f"  open:     {url}\n"
        f"  database: {database}\n"
        f"  first approver account (in another terminal):\n"
        f"    echo 'a long passphrase' | {create}\n"
        f"  then log in at {url}login\n"
    )


def require_postgresql_standby(settings: Settings) -> None:
    """A standby takes over a PostgreSQL database; on SQLite there is nothing to
    stand by for (one machine holds the file, and its supervisor restarts the
    primary)."""
    if is_sqlite(settings.resolved_database_url):
        raise SettingsError(
            "a standby needs PostgreSQL (--database-url postgresql://...): on SQLite the "
            "primary's machine holds the database, and restarting the primary is its failover"
        )


def standby_banner(settings: Settings) -> str:
    shown = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
    return (
        f"Arbiter standby on port {settings.port}: waiting for the primary's lease on {shown}\n"
        f"  it serves as the primary once the primary is gone; meanwhile /readyz answers 503\n"
    )


class StandbyServer(uvicorn.Server):
    """uvicorn serving the standby's app; remembers a stop signal, so a lease
    taken while stopping is given back rather than served."""

    signalled = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.signalled = True
        super().handle_exit(sig, frame)


def wait_as_standby(settings: Settings, listening: socket.socket) -> PrimaryLease | None:
    """Serve the standby's app (web/standby.py) until this process holds the
    primary's lease, polled every STANDBY_POLL_SECONDS in a thread of its own;
    the lease, or None when the process was told to stop first. The listening
    socket stays open throughout (uvicorn closes only its duplicate), so
    workers' connections wait in its backlog while the primary starts."""
    lease = primary_lease(settings.resolved_database_url)
    config = uvicorn.Config(standby_app, log_level=settings.log_level, lifespan="on")
    server = StandbyServer(config)
    stopping = threading.Event()
    engine = make_engine(settings.resolved_database_url, pool_size=1)
    storage = Storage(engine)  # to read the primary's mark
    watch = HolderWatch(LEASE_EXPIRY_CHECKS * settings.lease_check_seconds)

    def poll() -> None:
        while True:
            try:
                if lease.try_acquire():
                    log.warning("standby: the primary's lease is ours: starting as the primary")
                    server.should_exit = True
                    return
                if watch.expired(read_mark(storage)):
                    ended = lease.evict_holder()
                    log.warning(
                        "standby: the primary's beat stopped %g s ago: ended its %d session(s)",
                        watch.expiry,
                        ended,
                    )
                    watch.reset()
                    continue  # its lease is free now
            except StorageError:
                pass  # the database is away: ask again
            if stopping.wait(STANDBY_POLL_SECONDS):
                return

    poller = threading.Thread(target=poll, name="arbiter-standby", daemon=True)
    poller.start()
    try:
        server.run(sockets=[listening.dup()])
    finally:
        stopping.set()
        poller.join()
        engine.dispose()
    if server.signalled or not lease.held:
        lease.release()
        return None
    return lease


def serve_command(args: argparse.Namespace) -> int:
    """Everything an operator can get wrong is checked before uvicorn starts, in
    this order, each refusal one line on stderr and exit status 2: the settings,
    the port (bound now and kept, so nothing can take it before uvicorn listens),
    the primary's lease (before anything is migrated), the database, the object
    store when one is configured."""
    listening: socket.socket | None = None
    lease = None
    try:
        settings = settings_from_args(args)
        require_single_process_on_primary(settings, dict(os.environ))
        if settings.role == "standby":
            require_postgresql_standby(settings)
        listening = listening_socket(settings.host, settings.port)
        if settings.role == "standby":
            configure_logging(settings.log_level, settings.log_format)
            print(banner_output(settings, standby_banner(settings)), flush=True)
            lease = wait_as_standby(settings, listening)
            if lease is None:
                listening.close()
                return 0
            settings = replace(settings, role="primary")
        elif settings.is_primary:
            lease = primary_lease(settings.resolved_database_url)
        database = open_database(settings, lease)
        check_files(settings)
        app = create_app(settings, tune_runtime=True, lease=lease)
    except (SettingsError, StorageError, PortUnavailable) as error:
        print(f"arbiter: {error}", file=sys.stderr)
        if listening is not None:
            listening.close()
        if lease is not None:
            lease.release()
        return 2
    configure_logging(settings.log_level, settings.log_format)
    print(banner_output(settings, banner(settings, database.summary())), flush=True)
    raise_fd_limit()
    config = uvicorn_config(
        app, settings.host, settings.port, settings.log_level, connection_limits(settings)
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[listening])
    finally:
        if lease is not None:
            lease.release()
    return 0 if server.started else 1


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound (uvicorn starts listening on it); PortUnavailable
    when the address is taken or not ours, before any start-up work is done."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as error:
        listening.close()
        if error.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"port {port} on {host} is already in use (another server running?): "
                "choose another with --port"
            ) from None
        reason = error.strerror or str(error)
        raise PortUnavailable(f"cannot listen on {host}:{port}: {reason}") from None
    return listening


def connection_limits(settings: Settings) -> ConnectionLimits:
    return ConnectionLimits(
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
        header_timeout=settings.header_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
        body_min_rate=settings.body_min_bytes_per_second,
        max_connections=settings.max_connections,
        max_connections_per_address=settings.max_connections_per_address,
    )


def uvicorn_config(
    app: ASGIApp,
    host: str,
    port: int,
    log_level: str,
    limits: ConnectionLimits = DEFAULT_LIMITS,
) -> uvicorn.Config:
    """The one uvicorn setup (bench/ serves its raw-ASGI baseline with it too):
    httptools under our connection limits (web/connection_limits.py)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http=protocol_class(limits),
        ws="none",  # no websocket routes: an Upgrade request is served as plain HTTP
        backlog=BACKLOG,
        timeout_keep_alive=75,  # longer than a worker's 30 s request timeout
        log_level=log_level,
        log_config=None,  # uvicorn's lines go through our handler (web/logs.py), JSON too
        access_log=False,
        proxy_headers=True,
    )
