"""Reply bodies shared by middleware, handlers and error handlers.

Every worker reply carries `duration` (seconds since the request started, as
the reference measures it); API errors are `{"error": "<path>: <message>",
"duration": s}`.
"""

import html
import time
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()


def elapsed_since(started_at: float) -> float:
    return round(time.perf_counter() - started_at, 6)


def json_body(payload: dict[str, Any], started_at: float) -> bytes:
    return _encoder.encode({**payload, "duration": elapsed_since(started_at)})


def worker_error_body(path: str, message: str, started_at: float) -> bytes:
    return json_body({"error": f"{path}: {message}"}, started_at)


def plain_error_body(status: int, message: str) -> bytes:
    """A minimal page for errors raised before the app (and its templates) run."""
    text = html.escape(message)
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{status}</title>"
        f"<h1>{status}</h1><p>{text}</p></html>"
    ).encode()
