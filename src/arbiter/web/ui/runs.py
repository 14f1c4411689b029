"""The home page (run tables, fleet totals) and a run's own page."""

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.errors import NotFound
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui import run_format

TASKS_PER_PAGE = 100


async def tests(request: Request) -> Response:
    page_text = request.query_params.get("page", "1")
    page = int(page_text) if page_text.isdigit() and int(page_text) > 0 else 1
    overview = await run_in_threadpool(app_state(request).runs.queries.overview, page)
    context = {"overview": overview, "page": page, "fmt": run_format}
    return await render(request, "tests.html", context)


async def run_page(request: Request) -> Response:
    run_id = str(request.path_params["run_id"])
    try:
        detail = await run_in_threadpool(app_state(request).runs.queries.detail, run_id)
    except NotFound:
        raise HTTPException(404, f"There is no run {run_id}.") from None
    context = {"detail": detail, "run": detail.run, "fmt": run_format}
    return await render(request, "run.html", context)
