"""The home page (run tables, fleet totals) and a run's own page.

Both refresh themselves while visible (`static/app.js`): with `?live=1` they
answer only the part that changes, 204 when nothing changed since
`?version=`, and 286 once the run is finished (the poller stops).
"""

from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.errors import NotFound
from arbiter.domain.runs.approval import approve_refusal
from arbiter.domain.runs.service import Runs
from arbiter.domain.runs.task_table import TaskQuery
from arbiter.runtime.state import AppState
from arbiter.storage.base import ActionFilter
from arbiter.storage.records import RunRecord
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui import run_charts, run_code, run_format, run_view
from arbiter.web.ui.forms import current_user

# What a live refresh of the run page keeps of its address: the tasks table's
# page and order, and the SPSA chart's view.
TASK_PARAMS = ("page", "sort", "order", "worker", "show_task", "all", "spsa_view", "spsa_smooth")
LIVE_DONE = 286  # "final state, stop polling" (the reference's htmx convention)
RECENT_FAILURES = 3  # failed tasks a run page shows: why its workers keep giving up


async def tests(request: Request) -> Response:
    runs = app_state(request).runs
    user = current_user(request)
    overview, machines = await run_in_threadpool(
        lambda: (runs.queries.overview(), runs.queries.machines())
    )
    # Whether an approver's own pending runs get an approve button in the list.
    self_approval = bool(user and user.is_approver and overview.pending) and (
        await run_in_threadpool(runs.lifecycle.self_approval)
    )
    # An approver approving from the list is shown each run's ancestry warnings.
    pending_warnings = (
        await run_in_threadpool(_warnings_of, runs, overview.pending)
        if user is not None and user.is_approver and overview.pending
        else {}
    )
    context = {
        "overview": overview,
        "fmt": run_format,
        "self_approval": self_approval,
        "machines": machines,
        "pending_warnings": pending_warnings,
    }
    if request.query_params.get("live"):
        return await render(request, "tests_live.html", context, fragment=True)
    return await render(request, "tests.html", context)


def _warnings_of(runs: Runs, pending: list[RunRecord]) -> dict[str, list[str]]:
    """The ancestry warnings of the runs waiting for approval (a few). [THREAD]"""
    views = {run.id: runs.queries.code(run.id) for run in pending}
    return {run_id: list(view.warnings) for run_id, view in views.items() if view and view.warnings}


async def run_page(request: Request) -> Response:
    return await show_run(request, {})


async def show_run(request: Request, extra: dict[str, Any], status: int = 200) -> Response:
    """The run page; `extra` carries a refused modify form back (errors, values)."""
    run_id = str(request.path_params["run_id"])
    user = current_user(request)
    query = run_view.page_query(request.query_params)
    chart_view = run_charts.spsa_view(request.query_params)
    state = app_state(request)
    live = bool(request.query_params.get("live"))
    try:
        context = await run_in_threadpool(
            lambda: _with_code(
                _run_context(
                    state, run_id, with_pgns=user is not None, query=query, chart_view=chart_view
                ),
                state,
                live,
            )
        )
    except NotFound:
        raise HTTPException(404, f"There is no run {run_id}.") from None
    self_approval = context["self_approval"]
    context["actions"] = run_view.actions_for(user, context["detail"], self_approval)
    context["approve_why"] = approve_refusal(user, context["run"], self_approval=self_approval)
    context["code"] = run_code.code_section(context.pop("code_view"), context["run"], user)
    context.setdefault("modify_values", run_view.modify_values(context["detail"]))
    kept = {k: v for k, v in request.query_params.items() if k in TASK_PARAMS}
    context = {
        "modify_errors": {},
        "query": urlencode(kept),
        "page_url": page_url(request, f"/tests/view/{run_id}"),
        **context,
        **extra,
    }
    run = context["run"]
    if live:
        version = _version(run.last_updated)
        if request.query_params.get("version") == version and not run.finished:
            return Response(status_code=204, headers={"cache-control": "no-store"})
        status = LIVE_DONE if run.finished else 200
        reply = await render(request, "run_live.html", context, status, fragment=True)
        reply.headers["x-live-version"] = version
        return reply
    return await render(request, "run.html", context, status)


def _run_context(
    state: AppState,
    run_id: str,
    *,
    with_pgns: bool,
    query: TaskQuery,
    chart_view: run_charts.SpsaView,
) -> dict[str, Any]:
    queries = state.runs.queries
    detail = queries.detail(run_id)
    pending = not (detail.run.approved or detail.run.finished)
    shown = queries.task_slice(detail, query)
    pgn_ids = _stored_pgns(state, run_id) if with_pgns and (shown.tasks or shown.bad) else set()
    chi2 = detail.chi2
    tasks = run_view.tasks_page(shown, chi2, pgn_ids, query)
    return {
        "detail": detail,
        "run": detail.run,
        "fmt": run_format,
        "charts": run_charts.charts(detail.run, chart_view),
        "chart_view": chart_view,
        "spsa_scales": run_charts.SPSA_SCALE_NAMES,
        "max_smoothing": run_charts.MAX_SMOOTHING,
        "chi2": chi2,
        "tasks": tasks,
        "live_version": _version(detail.run.last_updated),
        "self_approval": pending and state.runs.lifecycle.self_approval(),
        "failures": state.actions.list(
            ActionFilter(action="failed_task", run_id=run_id, max_count=RECENT_FAILURES)
        ),
    }


def _with_code(context: dict[str, Any], state: AppState, live: bool) -> dict[str, Any]:
    """The run's code as submission read it: for the whole page, and for a live
    refresh of a run waiting for approval, whose Approve shows the warnings
    beside it (the refresh of any other run reads no diff). [THREAD]"""
    run = context["run"]
    pending = not (run.approved or run.finished or run.deleted)
    wanted = not live or pending
    return context | {"code_view": state.runs.queries.code(run.id) if wanted else None}


def _stored_pgns(state: AppState, run_id: str) -> set[int]:
    try:
        return set(state.pgns.run_task_ids(run_id))
    except NotFound:  # no PGN uploaded yet
        return set()


def page_url(request: Request, path: str) -> str:
    """The absolute URL of a page, for links shared elsewhere (Open Graph): under
    ARBITER_BASE_URL when set, else as the request reached us."""
    base = app_state(request).settings.base_url.rstrip("/")
    return f"{base}{path}" if base else str(request.url.replace(query="", fragment="", path=path))


def _version(last_updated: float) -> str:
    return f"{last_updated:.6f}"
