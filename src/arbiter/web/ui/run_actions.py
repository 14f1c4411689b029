"""The run page's buttons: approve, stop, purge, delete and modify (POST with CSRF).

Each calls the same `RunLifecycle` method as the runs API, then redirects to
the run page with a flash. A refusal the visitor can fix (already approved, a
bad modify value) comes back as a flash or beside the modify field; a refusal
of who they are (PermissionDenied) is the 403 page.
"""

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.accounts import User
from arbiter.domain.errors import ValidationError
from arbiter.domain.runs.lifecycle import RunLifecycle
from arbiter.web.api import app_state
from arbiter.web.ui.forms import (
    read_form,
    redirect,
    require_primary,
    require_user,
    run_id_of,
    session_of,
)
from arbiter.web.ui.runs import show_run

MODIFY_FIELDS = ("num_games", "priority", "throughput", "info")
RETURN_PAGES = frozenset({"/tests"})

Act = Callable[[RunLifecycle, User, str], object]


async def approve(request: Request) -> Response:
    return await _act(request, lambda lc, user, run_id: lc.approve(user, run_id), "Run approved.")


async def stop(request: Request) -> Response:
    return await _act(
        request, lambda lc, user, run_id: lc.stop(user, run_id, "User stop"), "Run stopped."
    )


async def purge(request: Request) -> Response:
    def act(lifecycle: RunLifecycle, user: User, run_id: str) -> str:
        purged = lifecycle.purge(user, run_id)
        return f"Purged {purged} task(s)." if purged else "Nothing to purge: no task looks bad."

    return await _act(request, act, "")


async def delete(request: Request) -> Response:
    return await _act(
        request, lambda lc, user, run_id: lc.delete(user, run_id), "Run deleted.", to="/tests"
    )


async def modify(request: Request) -> Response:
    user = require_user(request)
    require_primary(request)
    run_id = run_id_of(request)
    form = await read_form(request)
    requested: dict[str, object] = {name: form.get(name, "") for name in MODIFY_FIELDS}
    requested["auto_purge"] = form.get("auto_purge") == "on"
    lifecycle = app_state(request).runs.lifecycle
    try:
        await run_in_threadpool(lifecycle.modify, user, run_id, requested)
    except ValidationError as error:
        values = {**requested, "auto_purge": requested["auto_purge"]}
        field = error.field if error.field in (*MODIFY_FIELDS, "auto_purge") else "form"
        extra = {"modify_errors": {field: str(error)}, "modify_values": values}
        return await show_run(request, extra, status=400)
    session_of(request).flash("Run modified.")
    return redirect(f"/tests/view/{run_id}")


async def _act(request: Request, act: Act, done: str, *, to: str = "") -> Response:
    user = require_user(request)
    require_primary(request)
    run_id = run_id_of(request)
    form = await read_form(request)
    # Buttons in a list of runs come back to that list (only a known page).
    to = form.get("next", "") if form.get("next", "") in RETURN_PAGES else to
    lifecycle = app_state(request).runs.lifecycle
    try:
        result = await run_in_threadpool(act, lifecycle, user, run_id)
    except ValidationError as error:  # e.g. approved or finished meanwhile
        session_of(request).flash(str(error))
        return redirect(f"/tests/view/{run_id}")
    session_of(request).flash(result if isinstance(result, str) else done)
    return redirect(to or f"/tests/view/{run_id}")
