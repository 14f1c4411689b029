"""The worker protocol's task endpoints (reference 1.2), wire-compatible.

Each handler decodes the body on the event loop, then makes its service calls
(credentials, then the run service) in the threadpool, and answers JSON with
`duration`. The secondary-role middleware has already refused these paths
off the primary.
"""

import asyncio
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from arbiter.domain.files.pgns import decode_pgn_upload
from arbiter.domain.runs.ingest import ResultUpdate
from arbiter.domain.runs.scheduler import too_busy
from arbiter.protocol.messages import (
    BeatRequest,
    FailedTaskRequest,
    RequestSpsaRequest,
    RequestTaskRequest,
    StopRunRequest,
    UpdateTaskRequest,
    UploadPgnRequest,
    WorkerLogRequest,
)
from arbiter.web.api import app_state, authenticated_worker
from arbiter.web.jsonio import json_reply, read_body

MAX_LOG_MESSAGE = 5120
# s a call past its account's share of the gate may wait for one of its places,
# before "too busy"
OVER_SHARE_PAUSE = 1.0
# s a call at a full gate may wait for the next place given back, before "too
# busy": longer than what usually holds the gate up (a young collection, a WAL
# checkpoint: a few tens of ms), short enough that a saturated server still
# answers at once as a worker sees it
ROOM_PATIENCE = 0.05
# s before a call from an account and address at their machine limit is looked at
MACHINE_LIMIT_PAUSE = 1.0


def remote_address(request: Request) -> str:
    return request.client.host if request.client is not None else ""


async def request_task(request: Request) -> Response:
    body = await read_body(request, RequestTaskRequest)
    user = await authenticated_worker(request, body)
    scheduler = app_state(request).runs.scheduler
    address = remote_address(request)
    if scheduler.at_machine_limit(user, address):
        # Such a call is refused unless a task ends meanwhile. A client that
        # re-sends each refusal at once would otherwise make hundreds of calls a
        # second, each costing the core the fleet shares; after the pause (no
        # thread or gate place held) it makes one a second per call in flight,
        # and gets the reference's answer, only later.
        await asyncio.sleep(MACHINE_LIMIT_PAUSE)
    # A call past its account's share waits for one of the account's places, and
    # if none comes in time its "too busy" comes after that pause (no thread
    # held): a client that re-sends at once makes a few calls a second instead
    # of taking the event loop from the fleet. A call at a full gate waits
    # briefly for the next place: a "too busy" idles a worker for 15 s or more.
    if not await scheduler.admit_or_wait(user, OVER_SHARE_PAUSE, ROOM_PATIENCE):
        return json_reply(request, too_busy())
    # Answered by the scheduling thread (which gives the gate's place back);
    # waiting holds no threadpool thread.
    reply = await scheduler.assign_task_async(body.worker_info, user, address)
    return json_reply(request, reply)


async def update_task(request: Request) -> Response:
    body = await read_body(request, UpdateTaskRequest)
    await authenticated_worker(request, body)
    # Answered by the results thread once the batch it joins is durable; waiting
    # holds no threadpool thread (domain/runs/update_batches.py).
    update = ResultUpdate(body.worker_info, body.run_id, body.task_id, body.stats, body.spsa)
    reply = await app_state(request).runs.updates.update_task_async(update)
    return json_reply(request, reply)


async def beat(request: Request) -> Response:
    body = await read_body(request, BeatRequest)
    await authenticated_worker(request, body)
    ingest = app_state(request).runs.ingest
    # A live run's beat is a lease renewal in memory, answered on the event loop;
    # only a run that has left memory needs the database to say what became of it.
    reply = ingest.beat_live(body.worker_info, body.run_id, body.task_id)
    if reply is None:
        reply = await run_in_threadpool(ingest.beat, body.worker_info, body.run_id, body.task_id)
    return json_reply(request, reply)


async def request_spsa(request: Request) -> Response:
    body = await read_body(request, RequestSpsaRequest)
    await authenticated_worker(request, body)
    ingest = app_state(request).runs.ingest
    reply = await run_in_threadpool(
        ingest.request_spsa, body.worker_info, body.run_id, body.task_id
    )
    return json_reply(request, reply)


async def failed_task(request: Request) -> Response:
    body = await read_body(request, FailedTaskRequest)
    await authenticated_worker(request, body)
    ingest = app_state(request).runs.ingest
    reply = await run_in_threadpool(
        ingest.failed_task,
        body.worker_info,
        body.run_id,
        body.task_id,
        body.message[:MAX_LOG_MESSAGE],
    )
    return json_reply(request, reply)


async def stop_run(request: Request) -> Response:
    body = await read_body(request, StopRunRequest)
    user = await authenticated_worker(request, body)
    runs = app_state(request).runs

    def stop() -> dict[str, Any]:
        hours = float("inf") if user.is_approver else runs.cpu_hours(user.username)
        message = body.message[:MAX_LOG_MESSAGE]
        return runs.ingest.stop_run(body.worker_info, body.run_id, body.task_id, message, hours)

    return json_reply(request, await run_in_threadpool(stop))


async def worker_log(request: Request) -> Response:
    body = await read_body(request, WorkerLogRequest)
    await authenticated_worker(request, body)
    ingest = app_state(request).runs.ingest
    reply = await run_in_threadpool(
        ingest.worker_log,
        body.worker_info,
        body.message[:MAX_LOG_MESSAGE],
        body.run_id,
        body.task_id,
    )
    return json_reply(request, reply)


async def upload_pgn(request: Request) -> Response:
    body = await read_body(request, UploadPgnRequest)
    await authenticated_worker(request, body)
    state = app_state(request)

    def store() -> dict[str, Any]:
        state.runs.ingest.check_owner(body.worker_info, body.run_id, body.task_id)
        data = decode_pgn_upload(body.pgn)
        state.pgns.store(body.run_id, body.task_id, data)
        return {}

    return json_reply(request, await run_in_threadpool(store))
