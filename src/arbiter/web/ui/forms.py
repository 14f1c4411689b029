"""Helpers shared by the page handlers: forms with CSRF, who is asking, redirects."""

import re
from urllib.parse import quote

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse

from arbiter.domain.accounts import User
from arbiter.web.sessions import RequestSession, request_session

RUN_ID = re.compile(r"[0-9a-f]{24}")
CSRF_FAILED = "This form has expired or did not come from this site. Reload the page and try again."
MAX_FORM_FIELDS = 200


async def read_form(request: Request) -> dict[str, str]:
    """The submitted fields, once the CSRF token has been checked (403 otherwise).

    Parsing runs on the event loop; the body size middleware bounds its cost.
    """
    form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
    values = {key: value for key, value in form.items() if isinstance(value, str)}
    token = values.pop("csrf_token", "") or request.headers.get("x-csrf-token", "")
    if not session_of(request).csrf_matches(token):
        raise HTTPException(403, CSRF_FAILED)
    return values


async def read_upload_form(request: Request) -> tuple[dict[str, str], UploadFile | None]:
    """Like `read_form`, for a form with one file field: (fields, the file or None).

    The multipart parser spools the file to a temporary file as it arrives;
    the upload path's body limit (ARBITER_MAX_UPLOAD_BYTES) bounds it.
    """
    form = await request.form(max_files=1, max_fields=MAX_FORM_FIELDS)
    values = {key: value for key, value in form.items() if isinstance(value, str)}
    files = [value for value in form.values() if isinstance(value, UploadFile)]
    token = values.pop("csrf_token", "") or request.headers.get("x-csrf-token", "")
    if not session_of(request).csrf_matches(token):
        await form.close()  # the spooled file, now
        raise HTTPException(403, CSRF_FAILED)
    if files and not files[0].filename:
        await form.close()  # an empty file input
        return values, None
    return values, (files[0] if files else None)


def session_of(request: Request) -> RequestSession:
    return request_session(request.scope)


def current_user(request: Request) -> User | None:
    return session_of(request).user


def require_user(request: Request) -> User:
    user = current_user(request)
    if user is None:
        raise HTTPException(
            302, headers={"location": "/login?next=" + quote(request.url.path, safe="/")}
        )
    return user


def require_approver(request: Request) -> User:
    user = require_user(request)
    if not user.is_approver:
        raise HTTPException(403, "Only approvers may use this page.")
    return user


def require_primary(request: Request) -> None:
    """Changes to runs happen on the primary (it owns the live runs): 503 elsewhere."""
    if not request.app.state.arbiter.settings.is_primary:
        raise HTTPException(503, "This page changes runs: use the primary instance.")


def run_id_of(request: Request) -> str:
    """The `run_id` path parameter, 404 unless it looks like one."""
    run_id = str(request.path_params["run_id"])
    if not RUN_ID.fullmatch(run_id):
        raise HTTPException(404, f"There is no run {run_id}.")
    return run_id


def safe_next(target: str | None, default: str = "/tests") -> str:
    """Only same-site paths: an open redirect would make our login a phishing tool."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return default


def redirect(location: str) -> RedirectResponse:
    return RedirectResponse(location, status_code=303)
