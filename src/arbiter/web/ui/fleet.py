"""Pages about the people and machines: the actions log, contributors, the
machines at work, and blocking a worker machine (`/workers/<name>`)."""

import contextlib
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.action_log import MAX_WORDS, LogPage, LogQuery, log_page
from arbiter.domain.actions import ACTION_NAMES
from arbiter.domain.errors import BadRequest, SearchesBusy, ValidationError
from arbiter.domain.runs.contributors import Contributor, Summary
from arbiter.domain.runs.queries import Machine
from arbiter.domain.workers import WorkerBlocks, may_change
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui import run_format
from arbiter.web.ui.forms import (
    current_user,
    read_form,
    redirect,
    require_primary,
    require_user,
    session_of,
)
from arbiter.web.ui.listing import list_rows, parse_query

_NAME_PART = re.compile(r"[A-Za-z0-9]{1,64}")
_RUN_ID = re.compile(r"[0-9a-f]{24}")
_ORDERS = ("newest", "oldest")


# ---------------------------------------------------------------- actions


def action_filter(params: dict[str, str]) -> tuple[LogQuery, dict[str, str]]:
    """The log query from the query string (unknown or malformed values ignored),
    and the values to show in the filter form."""
    shown = {
        "action": _kept(params.get("action", ""), lambda value: value in ACTION_NAMES),
        "user": _kept(params.get("user", "").strip(), _NAME_PART.fullmatch),
        "run_id": _kept(params.get("run_id", "").strip(), _RUN_ID.fullmatch),
        "text": " ".join(params.get("text", "").split())[:MAX_WORDS],
        "order": _kept(params.get("order", ""), lambda value: value in _ORDERS) or "newest",
    }
    query = LogQuery(
        action=shown["action"] or None,
        user=shown["user"] or None,
        run_id=shown["run_id"] or None,
        words=shown["text"] or None,
        oldest_first=shown["order"] == "oldest",
        before=_time(params.get("before", "")),
        after=_time(params.get("after", "")),
    )
    return query, shown


def _kept(value: str, valid: Callable[[str], object]) -> str:
    return value if valid(value) else ""


def _time(text: str) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


async def actions(request: Request) -> Response:
    query, shown = action_filter(dict(request.query_params))
    storage = app_state(request).storage
    errors: dict[str, str] = {}
    page, status = LogPage([], False, None, ()), 200
    # Words are a search: one of its places, taken on the loop as /api/actions does.
    slot = app_state(request).actions.search_slot() if query.words else contextlib.nullcontext()
    try:
        with slot:
            page = await run_in_threadpool(log_page, storage, query)
    except BadRequest as error:
        errors["text"], status = str(error), 400
    except SearchesBusy:
        errors["text"], status = "Another search is running: try again in a moment.", 503
    context = {
        "log": page,
        "filters": shown,
        "errors": errors,
        "action_names": sorted(ACTION_NAMES),
        "next_page": _next_page(query, shown, page),
        "first_page": _log_link(shown),
        "flipped": _log_link({**shown, "order": "newest" if query.oldest_first else "oldest"}),
        "paged": query.before is not None or query.after is not None,
    }
    response = await render(request, "actions.html", context, status)
    if status == 503:
        response.headers["Retry-After"] = "1"
    return response


def _next_page(query: LogQuery, shown: dict[str, str], page: LogPage) -> str | None:
    """The link to the page after this one in its order, or None."""
    if not page.more or not page.entries:
        return None
    edge = "after" if query.oldest_first else "before"
    return _log_link({**shown, edge: repr(page.entries[-1]["time"])})


def _log_link(values: dict[str, str]) -> str:
    """The log page with these filters (empty ones and the default order left out)."""
    kept = {k: v for k, v in values.items() if v and (k, v) != ("order", "newest")}
    return "/actions?" + urlencode(kept) if kept else "/actions"


# ---------------------------------------------------------------- contributors


async def contributors(request: Request) -> Response:
    return await _contributors(request, last_month=False)


async def contributors_monthly(request: Request) -> Response:
    return await _contributors(request, last_month=True)


CONTRIBUTORS_PER_PAGE = 100
CONTRIBUTOR_SORTS: dict[str, Callable[[Contributor], Any]] = {
    "user": lambda c: c.username.lower(),
    "last_active": lambda c: c.last_active,
    "games_per_hour": lambda c: c.games_per_hour,
    "cpu_hours": lambda c: c.cpu_hours,
    "games": lambda c: c.games,
    "tests": lambda c: c.tests,
}


async def _contributors(request: Request, *, last_month: bool) -> Response:
    """Sorted by any column, paged; `?user=name` opens the page holding that
    user, highlighted. Ranks are by CPU hours whatever the order shown."""
    query = parse_query(request.query_params, list(CONTRIBUTOR_SORTS), "cpu_hours", descending=True)
    state = app_state(request)

    def build() -> tuple[list[Contributor], Summary, dict[str, str]]:
        table = state.runs.contributors.table(last_month=last_month)
        summary = state.runs.contributors.summary(last_month=last_month)
        repos = {u.username: u.tests_repo for u in state.accounts.list_users(pending=False)}
        return table, summary, repos

    table, summary, repos = await run_in_threadpool(build)
    ranks = {c.username: rank for rank, c in enumerate(table, start=1)}
    listed = list_rows(
        table,
        query,
        keys=CONTRIBUTOR_SORTS,
        text_of=lambda c: c.username,
        page_size=CONTRIBUTORS_PER_PAGE,
        is_focus=lambda c, name: c.username.casefold() == name.casefold(),
    )
    context = {
        "listed": listed,
        "summary": summary,
        "ranks": ranks,
        "repos": repos,
        "last_month": last_month,
        "path": request.url.path,
    }
    return await render(request, "contributors.html", context)


# ---------------------------------------------------------------- machines


MACHINES_PER_PAGE = 100
MACHINE_SORTS: dict[str, Callable[[Machine], Any]] = {
    "machine": lambda m: m.task.worker_name.lower(),
    "user": lambda m: m.task.username.lower(),
    "cores": lambda m: int(m.task.worker_info.get("concurrency", 0)),
    "mnps": lambda m: float(m.task.worker_info.get("nps", 0.0)),
    "run": lambda m: (m.run_title, m.task.task_id),
    "last_seen": lambda m: m.last_seen,
}


def _machine_text(machine: Machine) -> str:
    info = machine.task.worker_info
    parts = (machine.task.worker_name, machine.task.username, machine.run_title)
    extra = (info.get("uname", ""), info.get("worker_arch", ""), info.get("compiler", ""))
    return " ".join(str(part) for part in (*parts, *extra))


async def machines(request: Request) -> Response:
    """Workers holding a task: sorted, filtered, one's own only (`mine=1`), paged;
    with `live=1` only the table, which the page refreshes while visible."""
    user = current_user(request)
    query = parse_query(request.query_params, list(MACHINE_SORTS), "cores", descending=True)
    mine = request.query_params.get("mine") == "1" and user is not None
    found = await run_in_threadpool(app_state(request).runs.queries.machines)
    if mine and user is not None:
        key = user.username.casefold()
        found = [m for m in found if m.task.username.casefold() == key]
    listed = list_rows(
        found,
        query,
        keys=MACHINE_SORTS,
        text_of=_machine_text,
        page_size=MACHINES_PER_PAGE,
    )
    context = {"listed": listed, "mine": mine, "fmt": run_format}
    if request.query_params.get("live"):
        return await render(request, "machines_live.html", context, fragment=True)
    return await render(request, "machines.html", context)


# ---------------------------------------------------------------- worker blocks


def _blocks(request: Request) -> WorkerBlocks:
    state = app_state(request)
    return WorkerBlocks(state.storage, changed=state.runs.blocked_machines.forget)


async def blocked_workers(request: Request) -> Response:
    found = await run_in_threadpool(_blocks(request).blocked)
    health = app_state(request).health
    quarantined = await run_in_threadpool(health.queue) if health is not None else []
    user = current_user(request)
    context = {
        "blocked": found,
        "quarantined": quarantined,
        "may_release": user is not None and user.is_approver,
    }
    return await render(request, "workers.html", context)


async def release_worker(request: Request) -> Response:
    """An approver lifts a machine's quarantine (its evidence set aside)."""
    user = require_user(request)
    await read_form(request)  # the CSRF token is checked with the form
    name = str(request.path_params["worker_name"])
    health = app_state(request).health
    if health is None:
        raise HTTPException(404, "This server checks no machine's health.")
    await run_in_threadpool(health.release, user, name)
    session_of(request).flash(f"{name} released from quarantine.")
    return redirect(f"/workers/{name}")


def is_machine(worker_name: str, short_name: str) -> bool:
    """Whether a task's (long) worker name is a process of the machine `short_name`
    (the long name adds the process's own group to the short one)."""
    return worker_name == short_name or worker_name.startswith(short_name + "-")


async def worker(request: Request) -> Response:
    return await _worker_page(request, {})


async def purge_worker(request: Request) -> Response:
    """An approver takes a machine's results out of every run still going."""
    user = require_user(request)
    require_primary(request)  # the primary holds the runs still going
    await read_form(request)
    name = str(request.path_params["worker_name"])
    lifecycle = app_state(request).runs.lifecycle
    count = await run_in_threadpool(lifecycle.purge_machine, user, name)
    session_of(request).flash(f"Purged {count} task(s) of {name} from the runs still going.")
    return redirect(f"/workers/{name}")


async def _worker_page(request: Request, extra: dict[str, Any], status: int = 200) -> Response:
    name = str(request.path_params["worker_name"])
    found = await run_in_threadpool(_blocks(request).status, name)
    machines = await run_in_threadpool(app_state(request).runs.queries.machines)
    health = app_state(request).health
    quarantine, history, record = (
        await run_in_threadpool(
            lambda: (
                health.record_of(name),
                health.history(found.name),
                health.health_of(found.name),
            )
        )
        if health is not None
        else (None, [], None)
    )
    user = current_user(request)
    context = {
        "worker": found,
        "quarantine": quarantine,
        "history": history,
        "health_record": record,
        "may_release": user is not None and user.is_approver,
        "playing": [m for m in machines if is_machine(m.task.worker_name, name)],
        "may_change": may_change(user, name),
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
