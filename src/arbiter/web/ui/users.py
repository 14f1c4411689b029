"""User management for approvers: pending accounts, blocked accounts, everyone."""

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.accounts import User
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui.forms import read_form, redirect, require_approver, session_of

GROUPS = ("pending", "blocked", "all")


async def user_management(request: Request) -> Response:
    require_approver(request)
    params = request.query_params
    group = params.get("group", "pending")
    if group not in GROUPS:
        group = "pending"
    everyone = await run_in_threadpool(app_state(request).accounts.list_users)
    counts = {name: sum(1 for user in everyone if _in_group(user, name)) for name in GROUPS}
    text = params.get("q", "").strip()[:64]
    sort = params.get("sort", "registered")
    shown = [user for user in everyone if _in_group(user, group) and _matches(user, text)]
    if sort == "user":
        shown.sort(key=lambda user: user.username.casefold())
    else:
        sort = "registered"
        shown.sort(key=lambda user: user.registration_time, reverse=True)
    context = {
        "users": shown,
        "group": group,
        "groups": GROUPS,
        "counts": counts,
        "text": text,
        "sort": sort,
    }
    return await render(request, "user_management.html", context)


def _in_group(user: User, group: str) -> bool:
    return {"pending": user.pending, "blocked": user.blocked, "all": True}[group]


def _matches(user: User, text: str) -> bool:
    """The search: a part of the name or of the email, in any case."""
    wanted = text.casefold()
    return wanted in user.username.casefold() or wanted in user.email.casefold()


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
