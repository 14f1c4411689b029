"""JSON API handlers: parse the body, make one service call in the threadpool,
shape the reply (every reply carries `duration`).

Each handler is an `async def` that runs on the event loop only to read and
decode the body; the service call runs in the threadpool.
"""

import time

import msgspec
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.accounts import User
from arbiter.protocol import WORKER_VERSION
from arbiter.protocol.messages import VersionRequest, WorkerRequest
from arbiter.runtime.state import AppState
from arbiter.stats.calculator import CalcEloError, calc_elo
from arbiter.web.access_log import note_user
from arbiter.web.errors import ApiError
from arbiter.web.jsonio import json_reply, read_body


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.arbiter
    return state


def client_address(request: Request) -> str:
    """The client's address (the proxy's X-Forwarded-For from a trusted proxy)."""
    return request.client.host if request.client is not None else ""


async def authenticated_worker(request: Request, body: WorkerRequest | VersionRequest) -> User:
    """Credentials proven in the last minute are taken from memory on the event
    loop; others are checked against the database in the threadpool.

    The body's username then becomes the account's own spelling: names match
    case-insensitively, and whatever is counted or owned under a name (tasks,
    the machine limit, worker names and their blocks) must be counted once."""
    accounts = app_state(request).accounts
    username, secret = body.worker_info.username, body.password
    user = accounts.proven_worker(username, secret)
    if user is None:
        address = client_address(request)
        user = await run_in_threadpool(accounts.authenticate_worker, username, secret, address)
    body.worker_info.username = user.username
    note_user(request.scope, user.username)
    return user


async def request_version(request: Request) -> Response:
    """The cheapest worker call; workers also use it to check credentials at start."""
    body = await read_body(request, VersionRequest)
    await authenticated_worker(request, body)
    return json_reply(request, {"version": WORKER_VERSION})


# GitHub's hourly budget of API calls, as the reference's snapshot starts it.
GITHUB_HOURLY_CALLS = 5000


async def rate_limit(request: Request) -> Response:
    """The reference's snapshot of the server's GitHub API budget. Arbiter reads
    repositories with git and makes no GitHub API call, so the budget is whole:
    nothing used, all of it remaining, renewed within the hour. Clients that
    slow down near the limit (remaining <= 10) never need to."""
    now = int(time.time())
    snapshot = {
        "limit": GITHUB_HOURLY_CALLS,
        "remaining": GITHUB_HOURLY_CALLS,
        "reset": now - now % 3600 + 3600,
        "used": 0,
        "resource": "core",
        "_uninitialized": False,
        "github_api_calls": "none: this server reads repositories with git",
    }
    return Response(msgspec.json.encode(snapshot), media_type="application/json")


async def calc_elo_endpoint(request: Request) -> Response:
    query = dict(request.query_params)
    try:
        reply = await run_in_threadpool(calc_elo, query)
    except CalcEloError as error:
        raise ApiError(400, str(error)) from None
    return json_reply(request, reply)
