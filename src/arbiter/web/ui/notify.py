"""Follow a run (the bell), the followed runs that finished (for the browser's
notifications, `static/app.js`), and webhooks on the profile page."""

import math
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from arbiter.domain.errors import DomainError, NotFound
from arbiter.domain.quarantine import reason
from arbiter.domain.webhooks import EVENTS
from arbiter.web.api import app_state
from arbiter.web.ui.accounts import profile_page
from arbiter.web.ui.forms import (
    current_user,
    read_form,
    redirect,
    require_user,
    run_id_of,
    safe_next,
    session_of,
)


async def follow(request: Request) -> Response:
    """POST follow=1 or 0; back to the page the bell was on."""
    user = require_user(request)
    run_id = run_id_of(request)
    form = await read_form(request)
    wanted = form.get("follow") == "1"
    follows = app_state(request).follows
    try:
        await run_in_threadpool(lambda: follows.change(user.username, run_id, follow=wanted))
    except NotFound:
        raise HTTPException(404, f"There is no run {run_id}.") from None
    return redirect(safe_next(form.get("next"), f"/tests/view/{run_id}"))


async def notifications(request: Request) -> Response:
    """JSON: followed runs finished after `since` (Unix seconds), for an
    approver the machines quarantined since, and `now` to ask from next time.
    Without a session: 401 and nothing."""
    user = current_user(request)
    if user is None:
        return JSONResponse({"error": "log in to follow runs"}, status_code=401)
    state = app_state(request)
    now = state.runs.context.clock()
    try:
        since = float(request.query_params.get("since", "")[:32] or now)
    except ValueError:
        since = now
    if not math.isfinite(since):
        since = now
    found = await run_in_threadpool(state.follows.finished_since, user.username, since)
    runs = [
        {
            "id": f.run_id,
            "title": f.title,
            "url": f"/tests/view/{f.run_id}",
            "verdict": "accepted" if f.is_green else "yellow" if f.is_yellow else "finished",
            "at": f.at,
        }
        for f in found
    ]
    quarantined = []
    if user.is_approver and state.health is not None:
        quarantined = await run_in_threadpool(state.health.since, since)
    machines = [
        {
            "name": record.worker_name,
            "reason": reason(record),
            "url": f"/workers/{record.worker_name}",
            "at": record.since,
        }
        for record in quarantined
    ]
    latest = max([now, *(f.at for f in found), *(record.since for record in quarantined)])
    reply = JSONResponse({"runs": runs, "machines": machines, "now": latest})
    reply.headers["cache-control"] = "no-store"
    return reply


async def add_webhook(request: Request) -> Response:
    user = require_user(request)
    form = await read_form(request)
    events = [name for name in EVENTS if form.get(f"event_{name}")]
    values: dict[str, Any] = {
        "url": form.get("url", ""),
        "events": events,
        "format": form.get("format", "json"),
        "all_runs": form.get("all_runs") == "on",
    }
    hooks = app_state(request).webhooks
    try:
        await run_in_threadpool(
            lambda: hooks.register(
                user, values["url"], events, values["format"], all_runs=values["all_runs"]
            )
        )
    except DomainError as error:
        field = getattr(error, "field", "url") or "url"
        extra = {"hook_errors": {field: str(error)}, "hook_values": values}
        return await profile_page(request, extra, 400)
    session_of(request).flash("Webhook added.")
    return redirect("/user#webhooks")


async def remove_webhook(request: Request) -> Response:
    user = require_user(request)
    await read_form(request)
    hook_id = int(request.path_params["hook_id"])
    hooks = app_state(request).webhooks
    try:
        await run_in_threadpool(hooks.remove, user, hook_id)
    except NotFound:
        raise HTTPException(404, f"There is no webhook {hook_id}.") from None
    session_of(request).flash("Webhook removed.")
    return redirect("/user#webhooks")
