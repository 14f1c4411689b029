"""A submission from the web: validation in the threadpool, git in its own executor.

The one path the form and the runs API share. The git work (listing refs,
fetching, reading the commits, storing the run) runs in the git executor
(`domain/repos/work.py`) and the handler awaits its future on the event loop,
holding no threadpool thread, so submissions stuck on a slow host cannot take
the threads that pages, logins and workers need. Admission is decided on the
event loop without waiting (GitBusy, TooManyGitReads: 503/429 + Retry-After).
"""

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from arbiter.domain.accounts import User
from arbiter.runtime.state import AppState


@dataclass(frozen=True, slots=True)
class Submitted:
    run_id: str
    warnings: list[str]  # the ancestry warnings, shown to the submitter at once


async def submit_run(
    state: AppState, user: User, raw: Mapping[str, object], *, rescheduled_from: str | None = None
) -> Submitted:
    """The new run and its warnings; the lifecycle's refusals as they are (each
    logged once). `rescheduled_from`: the run this one repeats."""
    lifecycle = state.runs.lifecycle
    args = await run_in_threadpool(lifecycle.prepare, user, raw)
    run_id = await asyncio.wrap_future(
        lifecycle.submit_later(user, args, rescheduled_from=rescheduled_from)
    )
    code = await run_in_threadpool(state.runs.queries.code, run_id)
    return Submitted(run_id, list(code.warnings) if code is not None else [])
