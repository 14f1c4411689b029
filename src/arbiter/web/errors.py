"""Errors to HTTP, in one place.

`/api/*` always answers JSON `{"error": "<path>: <message>", "duration": s}`;
pages answer an HTML error page. Domain exceptions carry a user-facing message
and map to a status here; nothing below the web layer knows about HTTP.
"""

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from arbiter.domain.errors import (
    AccountBlocked,
    AccountPending,
    BadRequest,
    DomainError,
    GitBusy,
    InvalidCredentials,
    NotFound,
    PasswordChecksBusy,
    PermissionDenied,
    RetryLater,
    SearchesBusy,
    TooManyAttempts,
    TooManyGitReads,
    Unauthorized,
    UploadQuotaReached,
    ValidationError,
)
from arbiter.domain.files.stored import FileUnavailable
from arbiter.protocol import TEMPORARY_STATUSES
from arbiter.storage import QueryAbandoned, QueryTooLong, StorageUnavailable
from arbiter.web.middleware import is_api_path, request_started_at
from arbiter.web.replies import DEFAULT_RETRY_AFTER, api_error_body
from arbiter.web.templating import render_error_page

log = logging.getLogger("arbiter.web")

_NOSNIFF = {"x-content-type-options": "nosniff"}
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a request its client gave up


class ApiError(Exception):
    """An error the API reports as `{error, duration}` with this status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_DOMAIN_STATUS: tuple[tuple[type[DomainError], int], ...] = (
    (InvalidCredentials, 401),
    (AccountBlocked, 401),
    (AccountPending, 401),
    (Unauthorized, 401),
    (BadRequest, 400),
    (PermissionDenied, 403),
    (NotFound, 404),
    (ValidationError, 400),
    (TooManyAttempts, 429),
    (PasswordChecksBusy, 503),
    (TooManyGitReads, 429),
    (UploadQuotaReached, 429),
    (GitBusy, 503),
    (SearchesBusy, 503),
    (FileUnavailable, 503),
)

_REASONS = {
    400: "Bad request",
    401: "Not logged in",
    403: "Forbidden",
    404: "Page not found",
    405: "Method not allowed",
    413: "Request too large",
    429: "Too many requests",
    500: "Server error",
    503: "Service unavailable",
}


def domain_status(error: DomainError) -> int:
    for kind, status in _DOMAIN_STATUS:
        if isinstance(error, kind):
            return status
    return 400


def api_error_response(request: Request, status: int, message: str) -> Response:
    """`{error, duration}`, or a worker call's temporary refusal (web/replies.py);
    a 429 or 503 says when to retry (a RetryLater's own wait replaces it)."""
    path = request.url.path
    body = api_error_body(path, status, message, request_started_at(request.scope))
    # nosniff here too: a 500 is sent outside the middleware that adds it.
    headers = dict(_NOSNIFF)
    if status in TEMPORARY_STATUSES:
        headers["retry-after"] = str(DEFAULT_RETRY_AFTER)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


async def page_error_response(request: Request, status: int, message: str) -> Response:
    return await render_error_page(request, status, _REASONS.get(status, "Error"), message)


async def _respond(request: Request, status: int, message: str) -> Response:
    if is_api_path(request.url.path):
        return api_error_response(request, status, message)
    response = await page_error_response(request, status, message)
    if status in TEMPORARY_STATUSES:  # a page says when to retry as the API does
        response.headers.setdefault("retry-after", str(DEFAULT_RETRY_AFTER))
    return response


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = exc.detail if isinstance(exc.detail, str) else _REASONS.get(exc.status_code, "")
    if exc.status_code == 404 and is_api_path(request.url.path):
        message = "no such API endpoint" if message == "Not Found" else message
    response = await _respond(request, exc.status_code, message)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def handle_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return await _respond(request, exc.status, exc.message)


async def handle_domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DomainError)
    message = str(exc)
    if isinstance(exc, ValidationError) and is_api_path(request.url.path):
        # A form shows the message beside its field; an API caller has only the
        # text, so it names the field to fix ("num_games: must be even ...").
        message = f"{exc.field}: {message}"
    response = await _respond(request, domain_status(exc), message)
    if isinstance(exc, RetryLater):
        response.headers["retry-after"] = str(exc.wait_seconds)
    return response


async def handle_storage_unavailable(request: Request, exc: Exception) -> Response:
    # Retryable: workers back off on a JSON 503 (the database is restarting, say).
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    return await _respond(request, 503, "database unavailable, retry shortly")


async def handle_query_too_long(request: Request, exc: Exception) -> Response:
    # The database stopped a statement at the request bound (ARBITER_QUERY_SECONDS):
    # retryable, and worth a line, since an honest request should never get here.
    log.warning("query stopped on %s %s: %s", request.method, request.url.path, exc)
    return await _respond(request, 503, f"{exc}; retry later")


async def handle_query_abandoned(request: Request, exc: Exception) -> Response:
    # The client went away and its queries were stopped: nobody reads this
    # answer; 499 (the client closed the request) is what the access log shows.
    log.debug("queries of an abandoned request stopped on %s %s", request.method, request.url.path)
    return api_error_response(request, CLIENT_CLOSED_REQUEST, str(exc))


async def handle_client_disconnect(request: Request, exc: Exception) -> Response:
    # The client left before its body was complete: nothing went wrong here and
    # nobody reads the answer, so no traceback, only a line at debug level.
    log.debug("client disconnected mid-body on %s %s", request.method, request.url.path)
    return api_error_response(request, 400, "the client disconnected before the body ended")


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return await _respond(request, 500, "internal server error")


Handler = Callable[[Request, Exception], Awaitable[Response]]


def exception_handlers() -> Mapping[Any, Handler]:
    return {
        HTTPException: handle_http_exception,
        ApiError: handle_api_error,
        DomainError: handle_domain_error,
        StorageUnavailable: handle_storage_unavailable,
        QueryTooLong: handle_query_too_long,
        QueryAbandoned: handle_query_abandoned,
        ClientDisconnect: handle_client_disconnect,
        Exception: handle_unexpected,
    }
