"""The home page."""

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response


async def index(request: Request) -> Response:
    return RedirectResponse("/tests", status_code=302)
