"""Jinja2 rendering. Templates fail loudly (StrictUndefined) and render in the
threadpool: template rendering is CPU work that must not stall the event loop."""

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse

from arbiter import __version__
from arbiter.web.sessions import SCOPE_KEY, RequestSession

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"


@functools.cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["version"] = __version__
    env.globals["static_url"] = static_url
    env.filters["timestamp"] = format_timestamp
    return env


@functools.cache
def static_url(name: str) -> str:
    """A cache-busting URL: the file's modification time as a query string."""
    path = (STATIC_DIR / name).resolve()
    if STATIC_DIR.resolve() not in path.parents:
        raise ValueError(f"static file outside the static directory: {name}")
    return f"/static/{name}?v={int(path.stat().st_mtime)}"


def format_timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def page_context(request: Request, *, fragment: bool = False) -> dict[str, Any]:
    """What every template may use. A fragment (a live region's refresh) leaves
    the flashes for the next full page, which is where they are shown."""
    session: RequestSession | None = request.scope.get(SCOPE_KEY)
    if session is None:
        return {
            "user": None,
            "csrf_token": "",
            "flashes": [],
            "path": request.url.path,
            "pending_signups": lambda: 0,
            "followed_runs": frozenset,
        }
    return {
        "user": session.user,
        "csrf_token": session.csrf_token,
        "flashes": [] if fragment else session.take_flashes(),
        "path": request.url.path,
        "pending_signups": _pending_signups(request, session.user),
        "followed_runs": _followed_runs(request, session.user),
    }


def _followed_runs(request: Request, user: Any) -> Callable[[], frozenset[str]]:
    """The runs the visitor follows (the bells), read once when a template first
    asks, so in the threadpool where it renders."""
    state = getattr(request.app.state, "arbiter", None)
    if user is None or state is None:
        return frozenset
    return functools.cache(lambda: frozenset(state.follows.followed(user.username)))


def _pending_signups(request: Request, user: Any) -> Callable[[], int]:
    """For an approver's navigation: a count of the accounts waiting for review,
    asked for by the template, so the query runs where it renders (the
    threadpool). Nobody else is shown it."""
    if user is None or not user.is_approver:
        return lambda: 0
    state = getattr(request.app.state, "arbiter", None)
    if state is None:
        return lambda: 0
    return lambda: len(state.accounts.list_users(pending=True))


def compile_templates() -> None:
    """Compile every template now, so that no page's first view pays for its
    template (up to 40 ms each, 0.3 s for all). The server runs it in the
    threadpool once it serves, rather than delay start-up by it."""
    env = environment()
    for name in env.list_templates():
        env.get_template(name)


def render_sync(template: str, context: Mapping[str, Any]) -> str:
    return environment().get_template(template).render(context)


async def render(
    request: Request,
    template: str,
    context: Mapping[str, Any] | None = None,
    status: int = 200,
    *,
    fragment: bool = False,
) -> HTMLResponse:
    full = {**page_context(request, fragment=fragment), **(context or {})}
    body = await run_in_threadpool(render_sync, template, full)
    response = HTMLResponse(body, status_code=status)
    session: RequestSession | None = request.scope.get(SCOPE_KEY)
    # Pages that show a user's own data must not be stored by browsers or proxies.
    response.headers["cache-control"] = (
        "no-store" if session and session.user else "no-cache, private"
    )
    return response


async def render_error_page(
    request: Request, status: int, title: str, message: str
) -> HTMLResponse:
    return await render(
        request, "error.html", {"status": status, "title": title, "message": message}, status
    )
