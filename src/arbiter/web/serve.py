"""`arbiter serve`: run one Arbiter process under uvicorn.

uvicorn settings follow the seeds: httptools + uvloop, a deep accept backlog
so reconnection bursts queue in the kernel, and never `limit_concurrency`
(it answers plain-text 503s; workers need JSON).
"""

import argparse
import logging
import sys

import uvicorn
from sqlalchemy.engine import make_url
from starlette.types import ASGIApp

from arbiter.admin import settings_from_args
from arbiter.web.app import create_app
from arbiter.web.connection_limits import ConnectionLimits, protocol_class, raise_fd_limit
from arbiter.web.settings import Settings, SettingsError

BACKLOG = 16384
DEFAULT_LIMITS = ConnectionLimits()


def banner(settings: Settings) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host  # noqa: S104
    url = f"http://{host}:{settings.port}/"
    if settings.database_url:
        # Never print a database password to a terminal or a log.
        shown = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
        storage, where = shown, f"--database-url {shown}"
    else:
        storage, where = (
            f"SQLite in {settings.data_dir.resolve()}",
            f"--data-dir {settings.data_dir}",
        )
    create = f"arbiter users create NAME --approver --password-stdin {where}"
    return (
        f"Arbiter {settings.role} starting\n"
        f"  open:     {url}\n"
        f"  database: {storage}\n"
        f"  first approver account (in another terminal):\n"
        f"    echo 'a long passphrase' | {create}\n"
        f"  then log in at {url}login\n"
    )


def serve_command(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
        app = create_app(settings, tune_runtime=True)
    except SettingsError as error:
        print(f"arbiter: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    print(banner(settings), flush=True)
    raise_fd_limit()
    config = uvicorn_config(
        app, settings.host, settings.port, settings.log_level, connection_limits(settings)
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


def connection_limits(settings: Settings) -> ConnectionLimits:
    return ConnectionLimits(
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
        header_timeout=settings.header_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
        body_min_rate=settings.body_min_bytes_per_second,
        max_connections=settings.max_connections,
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
        access_log=False,
        proxy_headers=True,
    )
