"""The ASGI application: `create_app(settings)` and its lifespan.

Nothing is live at import time. `uvicorn --factory arbiter.web.app:create_app_from_env`
or `arbiter serve` builds the app; tests build as many as they need.

Lifespan (orchestrated on the event loop; blocking steps in the threadpool):
start-up applies THREADPOOL_TOKENS to anyio's limiter, refuses a multi-process
primary, opens storage (migrating an empty database), starts the background
jobs (in their own executor), registers the SIGUSR1 stack dump;
shutdown refuses new requests (503), drains, stops the jobs, writes the
download counts, then closes storage.
"""

import asyncio
import faulthandler
import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from arbiter.domain.accounts import ActiveSession
from arbiter.runtime.bootstrap import (
    JobTable,
    default_jobs,
    flush_before_close,
    open_state,
    start_jobs,
)
from arbiter.runtime.settings import Settings, SettingsError
from arbiter.runtime.state import AppState
from arbiter.storage.lease import PrimaryLease, primary_lease
from arbiter.storage.request_bounds import RequestQueries, serving
from arbiter.telemetry import time_collector_pauses
from arbiter.web.access_log import AccessLog
from arbiter.web.errors import exception_handlers
from arbiter.web.lease import LeaseKeeper, paused_without_lease
from arbiter.web.metrics import AppMetrics
from arbiter.web.middleware import (
    QUERIES_KEY,
    BodyLimits,
    BodySizeLimitMiddleware,
    HeadMethodMiddleware,
    RejectNonPrimaryWorkerApiMiddleware,
    RequestStateMiddleware,
    SecurityHeadersMiddleware,
    ShutdownGuardMiddleware,
)
from arbiter.web.observed import ObservedRequestsMiddleware, RequestObserver
from arbiter.web.overload import LoopLag
from arbiter.web.redirects import relative_slash_redirects
from arbiter.web.request_id import RequestIdMiddleware
from arbiter.web.routes import PATH_BODY_LIMITS, UPLOAD_PATHS, routes
from arbiter.web.sessions import EndedSessionRedirectMiddleware, SessionMiddleware
from arbiter.web.templating import compile_templates
from arbiter.web.worker_calls import WorkerCalls, WorkerGuards, is_worker_call, worker_routes

log = logging.getLogger("arbiter")

DRAIN_SECONDS = 0.5
JOBS_STOP_SECONDS = 10.0  # how long shutdown waits for running jobs


def require_single_process_on_primary(settings: Settings, environ: dict[str, str]) -> None:
    """The primary owns the scheduler and in-memory run state: exactly one process
    (a standby becomes the primary)."""
    if settings.role == "secondary":
        return
    for name in ("WEB_CONCURRENCY", "UVICORN_WORKERS"):
        value = environ.get(name)
        if value not in (None, "", "1"):
            raise SettingsError(
                f"{name}={value}: a primary must run as one process; "
                "serve more traffic with secondaries (--role secondary)"
            )


GC_YOUNG_THRESHOLD = 20_000  # allocations between young collections (CPython's default: 700)


def _tune_runtime_for_serving() -> None:
    """Keep the interpreter's housekeeping off the hot path of a long-lived server.

    What exists once start-up is done (modules, the app, runs loaded into
    memory) lives as long as the process: frozen, full collections no longer
    walk it. A larger young generation means fewer, still short, collections;
    under fleet load CPython's default ran one every few requests. Each
    collection's pause is timed for `/metrics` (arbiter_gc_pause_seconds).
    """
    time_collector_pauses()
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


class ArbiterApp(Starlette):
    """Starlette, with each worker protocol call handed to `worker_calls`
    (web/worker_calls.py) before its middleware stack; every other request,
    and the lifespan, goes through Starlette as usual. A request's database
    work is bounded (storage/request_bounds.py): its `RequestQueries` is in
    the context, and in the scope for the protocol to abandon."""

    def __init__(self, worker_calls: ASGIApp, **starlette: Any) -> None:
        super().__init__(**starlette)
        self.worker_calls = worker_calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        # Every request's transactions are bounded, and stopped if it is abandoned.
        queries = scope[QUERIES_KEY] = RequestQueries()
        with serving(queries):
            if is_worker_call(scope):
                scope["app"] = self
                await self.worker_calls(scope, receive, send)
                return
            await super().__call__(scope, receive, send)


class _Holder:
    """The process's state once the lifespan has built it, for what the app's
    parts ask of it before and after (sessions, the shutdown guard)."""

    def __init__(self) -> None:
        self.state: AppState | None = None

    def get(self) -> AppState:
        assert self.state is not None, "the app state is built by the lifespan"
        return self.state

    def is_shutting_down(self) -> bool:
        return self.state is not None and self.state.shutting_down

    def resolve_session(self, session_id: str) -> ActiveSession | None:
        return self.get().accounts.resolve_session(session_id)


@dataclass(frozen=True)
class _Serving:
    """What the lifespan starts and stops besides the state."""

    settings: Settings
    job_table: JobTable
    keeper: LeaseKeeper | None
    lag: LoopLag
    tune_runtime: bool


def _lifespan(
    holder: _Holder, serving: _Serving
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    settings, keeper = serving.settings, serving.keeper

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.threadpool_tokens
        _register_stack_dump()
        claim = keeper.claim if keeper is not None else None
        state = holder.state = await run_in_threadpool(open_state, settings, claim)
        app.state.arbiter = state
        if keeper is not None:
            state.lease_held = lambda: keeper.serving
            state.lease_confirmed = keeper.confirmed
            await run_in_threadpool(keeper.start, state.storage)
        state.jobs = await run_in_threadpool(start_jobs, state, serving.job_table)
        compiling: asyncio.Future[None] | None = None
        if serving.tune_runtime:
            _tune_runtime_for_serving()
            compiling = asyncio.ensure_future(run_in_threadpool(compile_templates))
        serving.lag.start()
        log.info(
            "arbiter %s ready (database %s; threadpool of %d threads)",
            settings.role,
            state.engine.url.render_as_string(),
            anyio.to_thread.current_default_thread_limiter().total_tokens,  # as applied
        )
        try:
            yield
        finally:
            state.shutting_down = True
            if compiling is not None:
                await compiling
            await serving.lag.stop()
            await asyncio.sleep(DRAIN_SECONDS)
            await _shut_down(state, keeper)

    return lifespan


async def _shut_down(state: AppState, keeper: LeaseKeeper | None) -> None:
    """After the drain: jobs, then the download counts, runs, lease and engine."""
    state.runs.code.work.shutdown()
    if state.jobs is not None:
        await run_in_threadpool(state.jobs.stop, JOBS_STOP_SECONDS)
    await run_in_threadpool(flush_before_close, state)
    await run_in_threadpool(state.runs.close)
    if keeper is not None:
        await run_in_threadpool(keeper.stop)
    await run_in_threadpool(state.engine.dispose)


def _middleware(
    settings: Settings,
    holder: _Holder,
    guards: list[Middleware],
    observers: list[RequestObserver],
) -> list[Middleware]:
    """The page and API stack, outermost first (worker calls skip it)."""
    return [
        Middleware(RequestIdMiddleware),
        # Outermost but for the request id (in every line below): sees every reply.
        Middleware(ObservedRequestsMiddleware, observers=observers),
        Middleware(HeadMethodMiddleware),
        *guards,
        Middleware(
            SessionMiddleware,
            secret=lambda: holder.get().secret_key,
            resolve=holder.resolve_session,
            secure=settings.secure_cookies,
            remember_seconds=settings.session_days * 86400,
        ),
        Middleware(EndedSessionRedirectMiddleware),
    ]


def _guards(
    settings: Settings,
    holder: _Holder,
    body_limits: BodyLimits,
    lease_held: Callable[[], bool] | None,
) -> list[Middleware]:
    """What every page and API request passes; worker calls pass the same
    checks in one object (`WorkerGuards`)."""
    return [
        Middleware(RequestStateMiddleware),
        Middleware(ShutdownGuardMiddleware, is_shutting_down=holder.is_shutting_down),
        Middleware(
            BodySizeLimitMiddleware,
            limit=body_limits.limit,
            upload_limit=body_limits.upload_limit,
            upload_paths=body_limits.upload_paths,
            path_limits=body_limits.path_limits,
        ),
        Middleware(
            RejectNonPrimaryWorkerApiMiddleware,
            is_primary=settings.is_primary,
            lease_held=lease_held,
        ),
        Middleware(SecurityHeadersMiddleware),
    ]


def create_app(
    settings: Settings,
    *,
    job_table: JobTable = default_jobs,
    tune_runtime: bool = False,
    lease: PrimaryLease | None = None,
) -> Starlette:
    """The app; `job_table` replaces the primary's jobs (tests). `tune_runtime` is for
    the server process (`arbiter serve`), not for tests that build many apps.
    `lease`: the primary's lease, already taken (web/lease.py keeps it)."""
    require_single_process_on_primary(settings, dict(os.environ))
    holder = _Holder()
    keeper = LeaseKeeper(lease, settings.lease_check_seconds) if lease is not None else None
    if keeper is not None:
        job_table = paused_without_lease(job_table, keeper)
    lease_held = (lambda: keeper.serving) if keeper is not None else None
    body_limits = BodyLimits(
        settings.max_body_bytes, settings.max_upload_bytes, UPLOAD_PATHS, PATH_BODY_LIMITS
    )
    table, handlers = routes(), exception_handlers()
    lag, metrics = LoopLag(settings.overload_lag_ms / 1000), AppMetrics()
    observers: list[RequestObserver] = [metrics.observe_request]
    if settings.access_log:
        observers.insert(0, AccessLog())
    # Worker calls pass the page stack's checks in one object, and are turned
    # away while the loop lags (web/worker_calls.py).
    guards = WorkerGuards(
        lag=lag,
        is_shutting_down=holder.is_shutting_down,
        body_limits=body_limits,
        is_primary=settings.is_primary,
        lease_held=lease_held,
    )
    app = ArbiterApp(
        WorkerCalls(worker_routes(table), handlers, guards, observers),
        routes=table,
        middleware=_middleware(
            settings, holder, _guards(settings, holder, body_limits, lease_held), observers
        ),
        exception_handlers=handlers,
        lifespan=_lifespan(holder, _Serving(settings, job_table, keeper, lag, tune_runtime)),
    )
    app.state.metrics = metrics
    app.state.loop_lag = lag
    relative_slash_redirects(app.router)
    return app


def create_app_from_env() -> Starlette:
    """Entry point for `uvicorn --factory`; a primary takes its lease at once."""
    settings = Settings.from_env()
    lease = primary_lease(settings.resolved_database_url) if settings.is_primary else None
    if lease is not None:
        lease.acquire()
    return create_app(settings, lease=lease)


def _register_stack_dump() -> None:
    # SIGUSR1 dumps every thread's stack to stderr: the tool for "why is it stuck".
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
