"""The runs API: scripting (submit and act on runs with a bearer token) and the
read-only endpoints of reference 1.3.

Handlers parse on the event loop and make one service call in the threadpool.
Mutations need the primary (it owns the live runs); reads work everywhere.
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Any

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.accounts import User
from arbiter.domain.modify_rules import Modifiable
from arbiter.domain.run_args import RunArgs
from arbiter.storage.base import FinishedRunFilter
from arbiter.web import submissions
from arbiter.web.access_log import note_user
from arbiter.web.api import app_state
from arbiter.web.errors import ApiError
from arbiter.web.jsonio import json_reply, read_json_object
from arbiter.web.params import whole_number

_TIMESTAMP = re.compile(r"\d{10}(\.\d+)?")
_RUN_ID = re.compile(r"[0-9a-f]{24}")
CORS = {"access-control-allow-origin": "*"}
# Browsers send JSON bodies only after a preflight that allows this header.
ACTIONS_CORS = {**CORS, "access-control-allow-headers": "content-type"}
# What a script may send. The form ignores other keys (its CSRF token), but a
# script's misspelt key would silently fall back to a default: refused here.
RUN_ARG_KEYS = frozenset(f.name for f in fields(RunArgs)) - {"allowed_archs"}
MODIFY_KEYS = frozenset(f.name for f in fields(Modifiable))


# ---------------------------------------------------------------- scripting


async def bearer_user(request: Request) -> User:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "send a worker token: Authorization: Bearer <token>")
    accounts = app_state(request).accounts
    user = await run_in_threadpool(accounts.authenticate_token, token.strip())
    note_user(request.scope, user.username)
    return user


def require_primary(request: Request) -> None:
    if not app_state(request).settings.is_primary:
        raise ApiError(503, "primary instance required")


def _run_id(request: Request) -> str:
    run_id = str(request.path_params["run_id"])
    if not _RUN_ID.fullmatch(run_id):
        raise ApiError(404, f"no run {run_id}")
    return run_id


async def submit_run(request: Request) -> Response:
    require_primary(request)
    user = await bearer_user(request)
    body = await read_json_object(request)
    _refuse_unknown(body, RUN_ARG_KEYS, "a run argument")
    submitted = await submissions.submit_run(app_state(request), user, body)
    reply: dict[str, Any] = {"run_id": submitted.run_id}
    if submitted.warnings:  # base not an ancestor of new, not on master, ...
        reply["warnings"] = submitted.warnings
    return json_reply(request, reply)


async def _act(request: Request, act: Callable[[User, str, dict[str, Any]], object]) -> Response:
    require_primary(request)
    user = await bearer_user(request)
    run_id = _run_id(request)
    body = await read_json_object(request) if await request.body() else {}
    result = await run_in_threadpool(act, user, run_id, body)
    reply = {"run_id": run_id}
    if isinstance(result, int) and not isinstance(result, bool):
        reply["purged_tasks"] = result  # type: ignore[assignment]
    return json_reply(request, reply)


async def approve_run(request: Request) -> Response:
    lifecycle = app_state(request).runs.lifecycle
    return await _act(request, lambda user, run_id, _body: lifecycle.approve(user, run_id))


async def stop_run(request: Request) -> Response:
    lifecycle = app_state(request).runs.lifecycle

    def stop(user: User, run_id: str, body: dict[str, Any]) -> None:
        message = body.get("message", "User stop")
        if not isinstance(message, str):
            raise ApiError(400, "message: expected a string")
        lifecycle.stop(user, run_id, message[:500] or "User stop")

    return await _act(request, stop)


async def modify_run(request: Request) -> Response:
    lifecycle = app_state(request).runs.lifecycle

    def modify(user: User, run_id: str, body: dict[str, Any]) -> None:
        _refuse_unknown(body, MODIFY_KEYS, "modifiable")
        lifecycle.modify(user, run_id, body)

    return await _act(request, modify)


def _refuse_unknown(body: dict[str, Any], known: Iterable[str], what: str) -> None:
    unknown = sorted(set(body) - set(known))
    if unknown:
        allowed = ", ".join(sorted(known))
        raise ApiError(400, f"{unknown[0]}: not {what} (allowed: {allowed})")


async def purge_run(request: Request) -> Response:
    lifecycle = app_state(request).runs.lifecycle
    return await _act(request, lambda user, run_id, _body: lifecycle.purge(user, run_id))


async def delete_run(request: Request) -> Response:
    lifecycle = app_state(request).runs.lifecycle
    return await _act(request, lambda user, run_id, _body: lifecycle.delete(user, run_id))


# ---------------------------------------------------------------- read-only


async def active_runs(request: Request) -> Response:
    runs = await run_in_threadpool(app_state(request).runs.queries.active_runs)
    return _plain_json(runs)


async def finished_runs(request: Request) -> Response:
    params = request.query_params
    page = whole_number(params.get("page", ""))
    if page is None or page < 1:
        raise ApiError(400, "page: a page number from 1 is required")
    since = None
    if params.get("timestamp"):
        if not _TIMESTAMP.fullmatch(params["timestamp"]):
            raise ApiError(400, "timestamp: Unix seconds (10 digits, optional fraction)")
        since = float(params["timestamp"])
    run_filter = FinishedRunFilter(
        username=params.get("username") or None,
        success_only=bool(params.get("success_only")),
        yellow_only=bool(params.get("yellow_only")),
        ltc_only=bool(params.get("ltc_only")),
        since=since,
    )
    queries = app_state(request).runs.queries
    runs = await run_in_threadpool(queries.finished_runs, page, run_filter)
    return _plain_json(runs)


async def get_run(request: Request) -> Response:
    run_id = _run_id(request)
    view = await run_in_threadpool(app_state(request).runs.queries.get_run, run_id)
    return _plain_json(view, CORS)


async def get_task(request: Request) -> Response:
    """A task, or with `<n>bad` the n-th task purged from the run (the reference's
    `bad_tasks[n]`)."""
    run_id = _run_id(request)
    task_text = str(request.path_params["task_id"])
    bad = task_text.endswith("bad")
    task_id = whole_number(task_text.removesuffix("bad"))
    if task_id is None:
        raise ApiError(404, f"no task {task_text} in run {run_id}")
    queries = app_state(request).runs.queries
    lookup = queries.get_bad_task if bad else queries.get_task
    view = await run_in_threadpool(lookup, run_id, task_id)
    return _plain_json(view)


async def get_elo(request: Request) -> Response:
    run_id = _run_id(request)
    view = await run_in_threadpool(app_state(request).runs.queries.get_elo, run_id)
    return _plain_json(view)


async def list_actions(request: Request) -> Response:
    """POST /api/actions: the body is a MongoDB-style query (`domain.action_query`),
    translated to SQL; at most 200 actions, oldest first, as the reference."""
    actions = app_state(request).actions
    with actions.search_slot():  # on the loop, before the body: a refusal costs little
        query = await read_json_object(request)
        found = await run_in_threadpool(actions.search, query)
    return _plain_json(found, ACTIONS_CORS)


def _plain_json(payload: Any, headers: dict[str, str] | None = None) -> Response:
    """Read endpoints answer the document itself (no `duration`), as the reference."""
    return Response(msgspec.json.encode(payload), media_type="application/json", headers=headers)
