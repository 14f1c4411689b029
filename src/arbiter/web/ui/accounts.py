"""Login, logout, signup and the user's own profile (password, email, worker tokens).

A refusal that lifts with time (a throttled password, every argon2 slot busy)
is shown like any other, beside its field, with its status (429, 503) and
Retry-After.
"""

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.errors import DomainError, RetryLater, ValidationError
from arbiter.domain.webhooks import EVENTS, FORMATS
from arbiter.web.api import app_state, client_address
from arbiter.web.errors import domain_status
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
    password, address = form.get("password", ""), client_address(request)
    try:
        state.accounts.guard.refuse_early(username, address)
        user = await run_in_threadpool(
            lambda: state.accounts.authenticate(username, password, address=address)
        )
    except RetryLater as error:
        page = await _login_page(
            request, {"password": str(error)}, username=username, status=domain_status(error)
        )
        return _retry_after(page, error)
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
PROOF_INPUT = "altcha"  # the solved challenge, as ALTCHA's widget names it


async def signup_form(request: Request) -> Response:
    context = {"errors": {}, "values": dict.fromkeys(SIGNUP_FIELDS, "")}
    return await render(request, "signup.html", _with_challenge(request, context))


def _with_challenge(request: Request, context: dict[str, Any]) -> dict[str, Any]:
    """The page's context with a new proof-of-work challenge, when one is asked."""
    proofs = app_state(request).signup_proofs
    return {**context, "proof_challenge": proofs.challenge() if proofs.asked else None}


async def signup(request: Request) -> Response:
    form = await read_form(request)
    values = {name: form.get(name, "").strip() for name in SIGNUP_FIELDS}
    errors = _signup_mismatch(form)
    password, address = form.get("password", ""), client_address(request)
    refusal: DomainError | None = None
    if not errors:
        try:  # hashing one SHA-256: on the loop, before any account work
            app_state(request).signup_proofs.check(form.get(PROOF_INPUT, ""))
        except ValidationError as error:
            errors = {error.field: str(error)}
    if not errors:
        try:
            await run_in_threadpool(
                lambda: app_state(request).accounts.signup(
                    values["username"],
                    password,
                    values["email"],
                    values["tests_repo"],
                    address=address,
                )
            )
        except ValidationError as error:
            errors = {error.field: str(error)}
        except RetryLater as error:
            errors, refusal = {"form": str(error)}, error
    if errors:
        context = _with_challenge(request, {"errors": errors, "values": values})
        page = await render(request, "signup.html", context, _status(refusal))
        return _retry_after(page, refusal)
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
    state = app_state(request)
    health = state.health
    tokens, hooks, table, quarantined, machine_health = await run_in_threadpool(
        lambda: (
            state.accounts.list_tokens(user.username),
            state.webhooks.of_user(user.username),
            state.runs.contributors.table(),  # cached: a few hundred rows
            health.of_owner(user.username) if health is not None else [],
            health.health_of_owner(user.username) if health is not None else [],
        )
    )
    context = {
        "profile": user,
        "contribution": next((c for c in table if c.username == user.username), None),
        "tokens": tokens,
        "quarantined": quarantined,
        "machine_health": machine_health,
        "errors": {},
        "new_token": None,
        "hooks": hooks,
        "hook_errors": {},
        "hook_values": {"url": "", "events": ["finished"], "format": "json", "all_runs": False},
        "hook_formats": FORMATS,
        "hook_events": EVENTS,
        **extra,
    }
    return await render(request, "profile.html", context, status)


profile_page = _profile_page  # the webhooks forms show their refusals on the same page


async def change_password(request: Request) -> Response:
    user = require_user(request)
    form = await read_form(request)
    if form.get("new_password", "") != form.get("new_password2", ""):
        return await _profile_page(
            request, {"errors": {"new_password2": "The two passwords differ."}}, 400
        )
    # An unticked checkbox sends nothing; the page ticks it by default.
    revoke_tokens = form.get("revoke_tokens") == "on"
    address = client_address(request)
    try:
        await run_in_threadpool(
            lambda: app_state(request).accounts.change_password(
                user.username,
                form.get("old_password", ""),
                form.get("new_password", ""),
                keep_session_id=session_of(request).session_id,
                revoke_tokens=revoke_tokens,
                address=address,
            )
        )
    except DomainError as error:
        return await _refused_on_profile(request, error, "old_password")
    done = "Password changed. Your other sessions have been logged out"
    revoked = " and your worker tokens revoked." if revoke_tokens else "."
    session_of(request).flash(done + revoked)
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
    """Asks for the current password: a stolen session alone must not mint a
    credential that outlives it."""
    user = require_user(request)
    form = await read_form(request)
    label = form.get("label", "").strip()
    password, address = form.get("current_password", ""), client_address(request)
    try:
        token = await run_in_threadpool(
            lambda: app_state(request).accounts.create_own_token(
                user.username, password, label, address=address
            )
        )
    except DomainError as error:
        return await _refused_on_profile(request, error, "current_password")
    # Shown once, in this response only: it is never stored in clear, nor put in a cookie.
    return await _profile_page(request, {"new_token": token})


async def _refused_on_profile(request: Request, error: DomainError, field: str) -> Response:
    """The profile page with the refusal beside its field (`field` unless the
    error names one)."""
    field = error.field if isinstance(error, ValidationError) else field
    page = await _profile_page(request, {"errors": {field: str(error)}}, _status(error))
    return _retry_after(page, error)


def _status(error: DomainError | None) -> int:
    """400 for a form's mistakes; 429 or 503 for a refusal that lifts with time."""
    return domain_status(error) if isinstance(error, RetryLater) else 400


def _retry_after(response: Response, error: DomainError | None) -> Response:
    if isinstance(error, RetryLater):
        response.headers["retry-after"] = str(error.wait_seconds)
    return response


async def revoke_token(request: Request) -> Response:
    user = require_user(request)
    await read_form(request)
    token_id = int(request.path_params["token_id"])
    await run_in_threadpool(app_state(request).accounts.revoke_token, user.username, token_id)
    session_of(request).flash("Token revoked.")
    return redirect("/user")
