"""The access log: one line per request on the `arbiter.access` logger.

    GET /api/nn/{name} 200 1.4ms 203.0.113.7 alice

Fields: method, the route's path template (the path itself, percent-encoded,
when no route matched), status, duration in milliseconds, client address,
user ("-" when unknown). The user is the session's, or the account a worker
or script call proved (`note_user`). An observer of `ObservedRequestsMiddleware`
(web/observed.py), on the event loop; when the logger is not enabled for INFO
a request costs one level check, and `ARBITER_ACCESS_LOG=0` leaves it out.
"""

import logging
from urllib.parse import quote

from starlette.routing import Route
from starlette.types import Scope

from arbiter.web.sessions import SCOPE_KEY as SESSION_KEY
from arbiter.web.sessions import RequestSession

ACCESS_LOG = logging.getLogger("arbiter.access")
USER_KEY = "arbiter.user"

# What a logged path may hold as is: no space (it separates fields), no control character.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def note_user(scope: Scope, username: str) -> None:
    """The account a request proved, for its access-log line."""
    scope[USER_KEY] = username


class AccessLog:
    """The access-log observer of `ObservedRequestsMiddleware` (web/observed.py)."""

    def __init__(self, logger: logging.Logger = ACCESS_LOG) -> None:
        self.logger = logger

    def __call__(self, scope: Scope, method: str, status: int, seconds: float) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        route, client, user = route_of(scope), client_of(scope), user_of(scope)
        milliseconds = seconds * 1000
        fields = {
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(milliseconds, 1),
            "client": client,
            "user": user,
        }
        self.logger.info(
            "%s %s %d %.1fms %s %s",
            method,
            route,
            status,
            milliseconds,
            client,
            user,
            extra={"fields": fields},
        )


def route_of(scope: Scope) -> str:
    route = scope.get("route")
    if isinstance(route, Route):
        return route.path
    return quote(scope["path"], safe=_PATH_SAFE)


def client_of(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


def user_of(scope: Scope) -> str:
    user: str | None = scope.get(USER_KEY)
    if user is None:
        session = scope.get(SESSION_KEY)
        if isinstance(session, RequestSession) and session.user is not None:
            user = session.user.username
    return quote(user, safe="") if user else "-"
