"""User management for approvers: pending accounts, blocked accounts, everyone."""

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui.forms import read_form, redirect, require_approver, session_of

GROUPS = ("pending", "blocked", "all")


async def user_management(request: Request) -> Response:
    require_approver(request)
    group = request.query_params.get("group", "pending")
    if group not in GROUPS:
        group = "pending"
    filters = {"pending": {"pending": True}, "blocked": {"blocked": True}, "all": {}}[group]
    users = await run_in_threadpool(lambda: app_state(request).accounts.list_users(**filters))
    return await render(
        request, "user_management.html", {"users": users, "group": group, "groups": GROUPS}
    )


async def _act(request: Request, action: Callable[[str, str], None], done: str) -> Response:
    approver = require_approver(request)
    form = await read_form(request)
    username = request.path_params["username"]
    await run_in_threadpool(action, approver.username, username)
    session_of(request).flash(done.format(username=username))
    group = form.get("group", "pending")
    return redirect(f"/user_management?group={group if group in GROUPS else 'pending'}")


async def accept(request: Request) -> Response:
    return await _act(request, app_state(request).accounts.accept, "{username} accepted.")


async def reject(request: Request) -> Response:
    return await _act(
        request, app_state(request).accounts.reject, "{username} rejected and removed."
    )


async def block(request: Request) -> Response:
    accounts = app_state(request).accounts
    return await _act(
        request, lambda by, name: accounts.set_blocked(by, name, True), "{username} blocked."
    )


async def unblock(request: Request) -> Response:
    accounts = app_state(request).accounts
    return await _act(
        request, lambda by, name: accounts.set_blocked(by, name, False), "{username} unblocked."
    )
