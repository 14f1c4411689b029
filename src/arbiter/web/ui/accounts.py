"""Login, logout, signup and the user's own profile (password, email, worker tokens)."""

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.errors import DomainError, ValidationError
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui.forms import read_form, redirect, require_user, safe_next, session_of


async def login_form(request: Request) -> Response:
    return await _login_page(request, {}, username="", status=200)


async def _login_page(
    request: Request, errors: dict[str, str], *, username: str, status: int
) -> Response:
    context = {
        "errors": errors,
        "username": username,
        "next": safe_next(request.query_params.get("next")),
    }
    return await render(request, "login.html", context, status)


async def login(request: Request) -> Response:
    form = await read_form(request)
    username = form.get("username", "").strip()
    state = app_state(request)
    try:
        user = await run_in_threadpool(
            state.accounts.authenticate, username, form.get("password", "")
        )
    except DomainError as error:
        return await _login_page(request, {"form": str(error)}, username=username, status=401)
    remember = form.get("remember") == "on"
    new_session = await run_in_threadpool(state.accounts.start_session, user, remember=remember)
    session_of(request).begin(new_session, remember=remember)
    return redirect(safe_next(form.get("next")))


async def logout(request: Request) -> Response:
    await read_form(request)
    session = session_of(request)
    if session.session_id:
        await run_in_threadpool(app_state(request).accounts.end_session, session.session_id)
    session.clear()
    return redirect("/tests")


SIGNUP_FIELDS = ("username", "email", "tests_repo")


async def signup_form(request: Request) -> Response:
    return await render(
        request, "signup.html", {"errors": {}, "values": dict.fromkeys(SIGNUP_FIELDS, "")}
    )


async def signup(request: Request) -> Response:
    form = await read_form(request)
    values = {name: form.get(name, "").strip() for name in SIGNUP_FIELDS}
    errors = _signup_mismatch(form)
    if not errors:
        try:
            await run_in_threadpool(
                app_state(request).accounts.signup,
                values["username"],
                form.get("password", ""),
                values["email"],
                values["tests_repo"],
            )
        except ValidationError as error:
            errors = {error.field: str(error)}
    if errors:
        return await render(request, "signup.html", {"errors": errors, "values": values}, 400)
    session_of(request).flash(
        "Account created. An approver will review it; you can log in once it is accepted."
    )
    return redirect("/login")


def _signup_mismatch(form: dict[str, str]) -> dict[str, str]:
    if form.get("password", "") != form.get("password2", ""):
        return {"password2": "The two passwords differ."}
    return {}


async def profile(request: Request) -> Response:
    return await _profile_page(request, {})


async def _profile_page(request: Request, extra: dict[str, Any], status: int = 200) -> Response:
    user = require_user(request)
    tokens = await run_in_threadpool(app_state(request).accounts.list_tokens, user.username)
    context = {"profile": user, "tokens": tokens, "errors": {}, "new_token": None, **extra}
    return await render(request, "profile.html", context, status)


async def change_password(request: Request) -> Response:
    user = require_user(request)
    form = await read_form(request)
    if form.get("new_password", "") != form.get("new_password2", ""):
        return await _profile_page(
            request, {"errors": {"new_password2": "The two passwords differ."}}, 400
        )
    try:
        await run_in_threadpool(
            lambda: app_state(request).accounts.change_password(
                user.username,
                form.get("old_password", ""),
                form.get("new_password", ""),
                keep_session_id=session_of(request).session_id,
            )
        )
    except DomainError as error:
        field = error.field if isinstance(error, ValidationError) else "old_password"
        return await _profile_page(request, {"errors": {field: str(error)}}, 400)
    session_of(request).flash("Password changed. Your other sessions have been logged out.")
    return redirect("/user")


async def update_profile(request: Request) -> Response:
    user = require_user(request)
    form = await read_form(request)
    try:
        await run_in_threadpool(
            lambda: app_state(request).accounts.update_profile(
                user.username,
                email=form.get("email", "").strip(),
                tests_repo=form.get("tests_repo", "").strip(),
            )
        )
    except ValidationError as error:
        return await _profile_page(request, {"errors": {error.field: str(error)}}, 400)
    session_of(request).flash("Profile saved.")
    return redirect("/user")


async def create_token(request: Request) -> Response:
    user = require_user(request)
    form = await read_form(request)
    label = form.get("label", "").strip()
    try:
        token = await run_in_threadpool(
            app_state(request).accounts.create_token, user.username, label
        )
    except ValidationError as error:
        return await _profile_page(request, {"errors": {error.field: str(error)}}, 400)
    # Shown once, in this response only: it is never stored in clear, nor put in a cookie.
    return await _profile_page(request, {"new_token": token})


async def revoke_token(request: Request) -> Response:
    user = require_user(request)
    await read_form(request)
    token_id = int(request.path_params["token_id"])
    await run_in_threadpool(app_state(request).accounts.revoke_token, user.username, token_id)
    session_of(request).flash("Token revoked.")
    return redirect("/user")
