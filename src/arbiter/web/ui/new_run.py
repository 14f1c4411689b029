"""The new test form, GET and POST /tests/run (reschedule: /tests/run?id=<run id>).

The POST calls the same `RunLifecycle.submit` as the runs API; a refusal
names its field, and the form is shown again with the message beside it.
"""

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.errors import NotFound, RetryLater, ValidationError
from arbiter.web import submissions as submitting
from arbiter.web.api import app_state
from arbiter.web.errors import domain_status
from arbiter.web.templating import render
from arbiter.web.ui import spsa_form, submission
from arbiter.web.ui.forms import (
    RUN_ID,
    read_form,
    redirect,
    require_primary,
    require_user,
    session_of,
)


async def new_run_form(request: Request) -> Response:
    user = require_user(request)
    require_primary(request)
    source = request.query_params.get("id", "")
    values = submission.blank_values(user.tests_repo, app_state(request).books.default_book())
    if source:
        values = await _values_of(request, source)
    return await _page(request, values, {}, source=source)


async def submit_run(request: Request) -> Response:
    user = require_user(request)
    require_primary(request)
    form = await read_form(request)
    source = form.get("rescheduled_from", "")
    source = source if RUN_ID.fullmatch(source) else ""
    values = submission.posted_values(form)
    if not source:  # a reschedule keeps the base of the run it repeats, as the reference
        values = spsa_form.tuned_against_itself(values)
    if form.get("autoselect"):  # the form again, SPSA gains written in, not a run
        return await _autoselect(request, values, source)
    try:
        raw = submission.submission(values)
        submitted = await submitting.submit_run(
            app_state(request), user, raw, rescheduled_from=source or None
        )
    except ValidationError as error:
        errors = {submission.error_field(error.field): str(error)}
        return await _page(request, values, errors, source=source, status=400)
    except RetryLater as busy:  # the git executor is full: the form again, and when to retry
        page = await _page(
            request, values, {"form": str(busy)}, source=source, status=domain_status(busy)
        )
        page.headers["retry-after"] = str(busy.wait_seconds)
        return page
    session_of(request).flash("Test submitted. It starts once an approver has approved it.")
    for warning in submitted.warnings:
        session_of(request).flash(f"Warning: {warning}")
    return redirect(f"/tests/view/{submitted.run_id}")


async def _autoselect(request: Request, values: dict[str, Any], source: str) -> Response:
    tc = str(submission.with_presets(values)["tc"])
    try:
        chosen = spsa_form.autoselected(values, tc)
    except ValidationError as error:
        errors = {submission.error_field(error.field): str(error)}
        return await _page(request, values, errors, source=source, status=400)
    return await _page(request, chosen, {}, source=source, note=spsa_form.AUTOSELECTED)


async def _values_of(request: Request, run_id: str) -> dict[str, Any]:
    if not RUN_ID.fullmatch(run_id):
        raise HTTPException(404, f"There is no run {run_id}.")
    try:
        run = await run_in_threadpool(app_state(request).runs.queries.run, run_id)
    except NotFound:
        raise HTTPException(404, f"There is no run {run_id}.") from None
    return submission.values_from_run(run.args)


async def _page(
    request: Request,
    values: dict[str, Any],
    errors: dict[str, str],
    *,
    source: str = "",
    status: int = 200,
    note: str = "",
) -> Response:
    library = app_state(request).books
    hosted = await run_in_threadpool(library.list)
    catalogue = [book.name for book in library.catalogue()]
    context = {
        "values": values,
        "errors": errors,
        "source": source,
        "books": sorted({*catalogue, *(book.name for book in hosted)}),
        "time_presets": submission.TIME_PRESETS,
        "bounds_presets": submission.BOUNDS_PRESETS,
        "stop_rules": submission.STOP_RULES,
        "compilers": submission.COMPILERS,
        "elo_models": submission.ELO_MODELS,
        "note": note,
    }
    return await render(request, "new_run.html", context, status)
