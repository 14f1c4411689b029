"""Health and metrics endpoints for load balancers, supervisors and Prometheus.

- `/healthz`: the process is up and its event loop answers (no I/O at all).
- `/readyz`: this process can do its job: the database answers, its schema is
  the revision this code needs, and a primary holds its lease. 200 or 503,
  with each check named, so a balancer takes a process out while it is not.
- `/metrics`: `web/metrics.py`, to allowed addresses only (403 otherwise).
"""

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from arbiter.runtime.state import AppState
from arbiter.storage.migrate import schema_status
from arbiter.web.api import app_state, client_address
from arbiter.web.metrics import AppMetrics, address_allowed, threadpool_gauges
from arbiter.web.overload import LoopLag

NO_STORE = {"cache-control": "no-store"}


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "alive"}, headers=NO_STORE)


async def readyz(request: Request) -> Response:
    state = app_state(request)
    checks = await run_in_threadpool(readiness, state)
    ready = all(value is True for value in checks.values() if isinstance(value, bool))
    body = {"status": "ready" if ready else "not ready", "role": state.settings.role, **checks}
    return JSONResponse(body, status_code=200 if ready else 503, headers=NO_STORE)


def readiness(state: AppState) -> dict[str, Any]:
    """[THREAD] The checks, each True or False; `schema` says which revisions differ."""
    checks: dict[str, Any] = {}
    try:
        status = schema_status(state.engine)
    except Exception:  # any failure to reach the database is "not ready", never a 500
        checks["database"] = False
        checks["migrations"] = False
    else:
        checks["database"] = True
        secondary_may_lag = not state.settings.is_primary and status.state == "newer_compatible"
        checks["migrations"] = status.state == "current" or secondary_may_lag
        if status.state != "current":
            checks["schema"] = {"database": status.current, "code": status.head}
    if state.settings.is_primary:
        checks["lease"] = state.lease_held() and state.lease_confirmed()
    return checks


async def metrics(request: Request) -> Response:
    state = app_state(request)
    if not address_allowed(client_address(request), state.settings.metrics_networks):
        return Response(
            "metrics are served only to ARBITER_METRICS_ALLOW\n",
            status_code=403,
            media_type="text/plain",
        )
    app_metrics: AppMetrics = request.app.state.metrics
    lag: LoopLag = request.app.state.loop_lag
    body = app_metrics.render({**gauges(state), **overload_gauges(lag)})
    return Response(body, media_type=app_metrics.content_type, headers=NO_STORE)


def overload_gauges(lag: LoopLag) -> dict[str, float]:
    return {"overload_shedding": int(lag.shedding()), "loop_lag_worst_seconds": lag.worst}


def gauges(state: AppState) -> dict[str, float]:
    """[LOOP] Read from memory only: cheap enough for the event loop."""
    load = state.runs.load()
    return {
        **threadpool_gauges(),
        "task_gate_places_held": load.gate_held,
        "task_gate_places": state.settings.task_semaphore_size,
        "active_runs": load.active_runs,
        "active_workers": load.active_workers,
        "job_queue_depth": state.jobs.queue_depth() if state.jobs is not None else 0,
        "primary_lease_held": 1 if state.settings.is_primary and state.lease_held() else 0,
    }
