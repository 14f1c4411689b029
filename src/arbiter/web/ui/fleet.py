"""Pages about the people and machines: the actions log, contributors, the
machines at work, and blocking a worker machine (`/workers/<name>`)."""

import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.actions import ACTION_NAMES
from arbiter.domain.errors import ValidationError
from arbiter.domain.workers import WorkerBlocks, may_change
from arbiter.storage.base import ActionFilter
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui import run_format
from arbiter.web.ui.forms import current_user, read_form, redirect, require_user, session_of

ACTIONS_PER_PAGE = 100
_NAME = re.compile(r"[A-Za-z0-9]{1,64}")
_RUN_ID = re.compile(r"[0-9a-f]{24}")


# ---------------------------------------------------------------- actions


def action_filter(params: dict[str, str]) -> tuple[ActionFilter, dict[str, str]]:
    """The log filter from the query string (unknown or malformed values ignored),
    and the values to show in the filter form."""
    action = params.get("action", "")
    username = params.get("user", "").strip()
    run_id = params.get("run_id", "").strip()
    before_text = params.get("before", "")
    try:
        before = float(before_text) if before_text else None
    except ValueError:
        before = None
    shown = {
        "action": action if action in ACTION_NAMES else "",
        "user": username if _NAME.fullmatch(username) else "",
        "run_id": run_id if _RUN_ID.fullmatch(run_id) else "",
    }
    return (
        ActionFilter(
            action=shown["action"] or None,
            username=shown["user"] or None,
            run_id=shown["run_id"] or None,
            before=before,
            max_count=ACTIONS_PER_PAGE + 1,
        ),
        shown,
    )


async def actions(request: Request) -> Response:
    query, shown = action_filter(dict(request.query_params))
    found = await run_in_threadpool(app_state(request).actions.list, query)
    page, more = found[:ACTIONS_PER_PAGE], len(found) > ACTIONS_PER_PAGE
    older = {**shown, "before": repr(page[-1]["time"])} if more and page else None
    context = {
        "entries": page,
        "filters": shown,
        "action_names": sorted(ACTION_NAMES),
        "older": older,
        "paged": query.before is not None,
    }
    return await render(request, "actions.html", context)


# ---------------------------------------------------------------- contributors


async def contributors(request: Request) -> Response:
    return await _contributors(request, last_month=False)


async def contributors_monthly(request: Request) -> Response:
    return await _contributors(request, last_month=True)


async def _contributors(request: Request, *, last_month: bool) -> Response:
    table = await run_in_threadpool(
        lambda: app_state(request).runs.contributors.table(last_month=last_month)
    )
    context = {"contributors": table, "last_month": last_month}
    return await render(request, "contributors.html", context)


# ---------------------------------------------------------------- machines


async def machines(request: Request) -> Response:
    found = await run_in_threadpool(app_state(request).runs.queries.machines)
    context = {"machines": found, "fmt": run_format}
    return await render(request, "machines.html", context)


# ---------------------------------------------------------------- worker blocks


def _blocks(request: Request) -> WorkerBlocks:
    state = app_state(request)
    return WorkerBlocks(state.storage, changed=state.runs.blocked_machines.forget)


async def blocked_workers(request: Request) -> Response:
    found = await run_in_threadpool(_blocks(request).blocked)
    return await render(request, "workers.html", {"blocked": found})


def is_machine(worker_name: str, short_name: str) -> bool:
    """Whether a task's (long) worker name is a process of the machine `short_name`
    (the long name adds the process's own group to the short one)."""
    return worker_name == short_name or worker_name.startswith(short_name + "-")


async def worker(request: Request) -> Response:
    return await _worker_page(request, {})


async def _worker_page(request: Request, extra: dict[str, Any], status: int = 200) -> Response:
    name = str(request.path_params["worker_name"])
    found = await run_in_threadpool(_blocks(request).status, name)
    machines = await run_in_threadpool(app_state(request).runs.queries.machines)
    context = {
        "worker": found,
        "playing": [m for m in machines if is_machine(m.task.worker_name, name)],
        "may_change": may_change(current_user(request), name),
        "errors": {},
        "message": found.message,
        **extra,
    }
    return await render(request, "worker.html", context, status)


async def set_worker_block(request: Request) -> Response:
    user = require_user(request)
    form = await read_form(request)
    name = str(request.path_params["worker_name"])
    blocked = form.get("blocked") == "true"
    message = form.get("message", "")
    try:
        await run_in_threadpool(
            lambda: _blocks(request).set_blocked(user, name, blocked=blocked, message=message)
        )
    except ValidationError as error:
        extra = {"errors": {error.field: str(error)}, "message": message}
        return await _worker_page(request, extra, 400)
    session_of(request).flash(f"{name} {'blocked' if blocked else 'unblocked'}.")
    return redirect(f"/workers/{name}")
