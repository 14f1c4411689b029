"""Finished tests (`/tests/finished`: tabs, search, pages with totals) and one
user's tests (`/tests/user/<name>`: live runs, then their finished ones).

Pages are linked by cursor (`before`/`after`, storage/sql_finished.py), so a
link stays on the same runs however many finish meanwhile, and a page deep in
the history costs what the first does. The reference's `?page=N` reads as the
first page."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.runs.queries import FinishedPage
from arbiter.runtime.state import AppState
from arbiter.storage.base import FinishedRunFilter
from arbiter.storage.records import RunRecord
from arbiter.web.api import app_state
from arbiter.web.templating import render
from arbiter.web.ui import run_format

# The tabs, in order: (key, label, filter). The reference's query flags
# (success_only, yellow_only, ltc_only) select the same tabs.
TABS: tuple[tuple[str, str, FinishedRunFilter], ...] = (
    ("all", "All", FinishedRunFilter()),
    ("green", "Green", FinishedRunFilter(success_only=True)),
    ("yellow", "Yellow", FinishedRunFilter(yellow_only=True)),
    ("ltc", "LTC", FinishedRunFilter(ltc_only=True)),
)
_FLAGS = {"success_only": "green", "yellow_only": "yellow", "ltc_only": "ltc"}
MAX_SEARCH_CHARS = 100
MAX_CURSOR_CHARS = 64
_USERNAME = re.compile(r"[A-Za-z0-9]{1,64}")


@dataclass(frozen=True, slots=True)
class Search:
    """What the finished tests page was asked for, cleaned of what cannot match."""

    tab: str
    user: str
    text: str

    before: str = ""  # the page's cursor (sql_finished.py): older than this...
    after: str = ""  # ...or newer than this

    def run_filter(self) -> FinishedRunFilter:
        base = next(f for key, _, f in TABS if key == self.tab)
        return replace(
            base, user_contains=self.user, text=self.text, before=self.before, after=self.after
        )

    def query(self, **changes: object) -> str:
        """The query string of this search's first page, with `changes` (empty
        values left out)."""
        values = {"tab": self.tab, "user": self.user, "text": self.text, **changes}
        kept = {k: v for k, v in values.items() if v not in ("", None, "all")}
        return urlencode(kept)


def parse_search(params: Mapping[str, str]) -> Search:
    tab = params.get("tab", "")
    for flag, flagged_tab in _FLAGS.items():
        if params.get(flag) in ("1", "true", "on"):
            tab = flagged_tab
    if tab not in {key for key, _, _ in TABS}:
        tab = "all"
    user = params.get("user", "").strip()[:64]
    text = " ".join(params.get("text", "").split())[:MAX_SEARCH_CHARS]
    before, after = page_cursors(params)
    return Search(tab=tab, user=user, text=text, before=before, after=after)


def page_cursors(params: Mapping[str, str]) -> tuple[str, str]:
    """(before, after) of a list's page link; one at most, each as long as a cursor
    can be (storage checks the rest: a foreign one reads as the first page)."""
    before, after = params.get("before", ""), params.get("after", "")
    if len(before) > MAX_CURSOR_CHARS or len(after) > MAX_CURSOR_CHARS:
        return "", ""
    return (before, "") if before else ("", after)


async def finished_tests(request: Request) -> Response:
    search = parse_search(request.query_params)
    state = app_state(request)
    found = await run_in_threadpool(state.runs.queries.finished_page, search.run_filter())
    context = {"search": search, "tabs": TABS, "found": found, "fmt": run_format}
    return await render(request, "finished.html", context)


async def user_tests(request: Request) -> Response:
    name = str(request.path_params["username"])
    if not _USERNAME.fullmatch(name):
        raise HTTPException(404, f"There is no user {name}.")
    before, after = page_cursors(request.query_params)
    state = app_state(request)
    owner, live, found = await run_in_threadpool(_user_tests, state, name, before, after)
    context = {"owner": owner, "live": live, "found": found, "fmt": run_format}
    return await render(request, "user_tests.html", context)


def _user_tests(
    state: AppState, name: str, before: str, after: str
) -> tuple[str, list[RunRecord], FinishedPage]:
    """(the name as the account spells it, live runs, a page of finished ones). A
    name without an account is shown as asked: its runs may outlive the account."""
    account = state.accounts.get_user(name)
    owner = account.username if account is not None else name
    live = state.runs.queries.live_of(owner)
    run_filter = FinishedRunFilter(username=owner, before=before, after=after)
    return owner, live, state.runs.queries.finished_page(run_filter)
