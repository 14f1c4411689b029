"""The home page, and the site's icon."""

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response

from arbiter.web.templating import STATIC_DIR

FAVICON = STATIC_DIR / "favicon.svg"


async def index(request: Request) -> Response:
    return RedirectResponse("/tests", status_code=302)


async def favicon(request: Request) -> Response:
    """What browsers ask `/favicon.ico` for, whatever a page's own link says."""
    return FileResponse(
        FAVICON, media_type="image/svg+xml", headers={"cache-control": "public, max-age=86400"}
    )
