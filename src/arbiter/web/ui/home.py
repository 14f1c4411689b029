"""The home page."""

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from arbiter.web.templating import render


async def index(request: Request) -> Response:
    return RedirectResponse("/tests", status_code=302)


async def tests(request: Request) -> Response:
    return await render(request, "tests.html")
