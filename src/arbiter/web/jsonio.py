"""Reading JSON request bodies and writing JSON replies for the API.

Decoding runs on the event loop: bodies are small (the size limit middleware
caps them) and msgspec decodes a typical worker body in microseconds.
"""

from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from arbiter.protocol.messages import BodyError, decode_body
from arbiter.web.errors import ApiError
from arbiter.web.middleware import request_started_at
from arbiter.web.replies import json_body

MAX_JSON_DEPTH = 32

T = TypeVar("T")


async def read_json_object(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        payload = msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        raise ApiError(400, f"request is not json encoded ({error})") from None
    except UnicodeDecodeError:  # msgspec's answer to a string that is not UTF-8
        raise ApiError(400, "request is not valid UTF-8") from None
    except RecursionError:
        raise ApiError(400, "request body nested too deeply") from None
    if not isinstance(payload, dict):
        raise ApiError(400, "request body must be a JSON object")
    if _may_nest_deeply(raw) and _depth(payload) > MAX_JSON_DEPTH:
        raise ApiError(400, f"request body nested deeper than {MAX_JSON_DEPTH} levels")
    return payload


async def read_body(request: Request, kind: type[T]) -> T:
    raw = await request.body()
    if not _may_nest_deeply(raw):
        # A well-formed body decodes straight into its struct, in one pass (a
        # worker's call is nearly all of them); any problem takes the two-step
        # path below, whose messages say what is wrong.
        try:
            return msgspec.json.decode(raw, type=kind)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            pass
    payload = await read_json_object(request)
    try:
        return decode_body(payload, kind)
    except BodyError as error:
        raise ApiError(400, str(error)) from None


def json_reply(request: Request, payload: dict[str, Any], status: int = 200) -> Response:
    body = json_body(payload, request_started_at(request.scope))
    return Response(body, status_code=status, media_type="application/json")


def _may_nest_deeply(raw: bytes) -> bool:
    """False when the body has too few brackets to nest too deeply (brackets inside
    strings only raise the count): a worker's body skips the walk below."""
    return raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH


def _depth(value: Any, level: int = 1) -> int:
    # Iterative bound check: refuses hostile nesting without deep recursion.
    stack = [(value, level)]
    deepest = level
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest
