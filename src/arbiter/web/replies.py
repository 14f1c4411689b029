"""Reply bodies shared by middleware, handlers and error handlers.

Every worker reply carries `duration` (seconds since the request started, as
the reference measures it); API errors are `{"error": "<path>: <message>",
"duration": s}`.

One exception, for the official Fishtest worker: it takes any JSON object with
an `error` key as final (on request_version it concludes its credentials are
bad and exits; on update_task it drops the task and the games of the batch),
whatever the HTTP status, and a reply that is not a JSON object as a network
problem, which it retries. So a *temporary* refusal of a worker call (a 429 or
a 503: overload, the password gate, throttling, shutdown, a lost lease, the
database away) is a JSON string, `"<path>: <message>"`, with Retry-After;
final refusals keep the `{error, duration}` object.
"""

import html
import time
from typing import Any

import msgspec

from arbiter.protocol import TEMPORARY_STATUSES, WORKER_PATHS

_encoder = msgspec.json.Encoder()

DEFAULT_RETRY_AFTER = 5  # s, when the refusal itself does not know better


def elapsed_since(started_at: float) -> float:
    return round(time.perf_counter() - started_at, 6)


def json_body(payload: dict[str, Any], started_at: float) -> bytes:
    return _encoder.encode({**payload, "duration": elapsed_since(started_at)})


def worker_error_body(path: str, message: str, started_at: float) -> bytes:
    return json_body({"error": f"{path}: {message}"}, started_at)


def is_temporary_worker_refusal(path: str, status: int) -> bool:
    """Whether a refusal of a call to `path` must not look final to a worker."""
    return status in TEMPORARY_STATUSES and path in WORKER_PATHS


def temporary_refusal_body(path: str, message: str) -> bytes:
    """A JSON string, never an object: the official worker retries it."""
    return _encoder.encode(f"{path}: {message}")


def api_error_body(path: str, status: int, message: str, started_at: float) -> bytes:
    """The body of an API error: a temporary refusal of a worker call, or
    `{error, duration}`."""
    if is_temporary_worker_refusal(path, status):
        return temporary_refusal_body(path, message)
    return worker_error_body(path, message, started_at)


def plain_error_body(status: int, message: str) -> bytes:
    """A minimal page for errors raised before the app (and its templates) run."""
    text = html.escape(message)
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{status}</title>"
        f"<h1>{status}</h1><p>{text}</p></html>"
    ).encode()
