"""Redirects whose Location is a path, never an absolute URL.

Starlette's router answers `/tests/` with a redirect to `/tests` built from the
request's Host header, so a forged Host made the site send visitors to another
host. `relative_slash_redirects` puts an equivalent in its place that answers
with the path alone (browsers resolve it against the page they asked for).
Runs on the event loop, and only for requests no route matched.
"""

from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Match, Router
from starlette.types import ASGIApp, Receive, Scope, Send


def relative_slash_redirects(router: Router) -> None:
    """Replace the router's slash redirect (absolute, from Host) with ours."""
    router.redirect_slashes = False
    router.default = SlashRedirect(router.routes, fallback=router.default)


class SlashRedirect:
    """The router's fallback: `/x/` -> `/x` (or `/x` -> `/x/`) when a route takes
    the other form, else the router's own not-found answer."""

    def __init__(self, routes: list[BaseRoute], fallback: ASGIApp) -> None:
        self.routes = routes
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        location = self._location(scope) if scope["type"] == "http" else None
        if location is None:
            await self.fallback(scope, receive, send)
            return
        await RedirectResponse(location)(scope, receive, send)

    def _location(self, scope: Scope) -> str | None:
        path: str = scope["path"]
        if path == "/":
            return None
        other = path.rstrip("/") if path.endswith("/") else path + "/"
        # "//host" would be a protocol-relative URL: a redirect to another site.
        if not other or other.startswith("//"):
            return None
        candidate = {**scope, "path": other}
        if not any(route.matches(candidate)[0] is not Match.NONE for route in self.routes):
            return None
        # RedirectResponse percent-encodes what a header may not carry (and "\\").
        query = scope.get("query_string", b"").decode("latin-1")
        root: str = scope.get("root_path", "")
        return root + other + (f"?{query}" if query else "")
