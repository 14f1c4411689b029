"""The worker's main loop (reference 2.2): request_version -> request_task ->
play the task -> close it, over and over.

A failed iteration (no work, an error, a failed task) waits 15 s, doubling
up to 15 min; a completed task resets the wait. With `fleet`, the worker
exits instead of waiting. A temporary refusal (the server busy, restarting or
throttling: HTTP 429 or 503) is no failure: the worker waits what the server
asked, at least 15 s and a little more at random, without doubling the wait
or exiting, in fleet mode too. A `stop` file in the data directory ends the
worker between tasks; SIGINT/SIGTERM end the current task (its last report
sent, then failed_task) and exit. Runs in the main thread.
"""

import enum
import fcntl
import logging
import os
import random
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arbiter.protocol import WORKER_VERSION
from arbiter.worker.assignment import parse_assignment
from arbiter.worker.client import TemporaryRefusalError, TransportError
from arbiter.worker.errors import ConfigError, CredentialsError, FatalError, RunError, WorkerError
from arbiter.worker.state import LOCK_FILE
from arbiter.worker.task import TaskContext, run_task

log = logging.getLogger("arbiter.worker")

BACKOFF_START = 15.0  # s
BACKOFF_MAX = 900.0
STOP_FILE = "stop"


class Outcome(enum.Enum):
    DONE = "a task was played"
    NO_TASK = "the server has no task for this worker"
    FAILED = "the last attempt failed"
    EXIT = "exit"


@dataclass(frozen=True, slots=True)
class RefusedForNow:
    """The server refused this iteration's call for now and asked for `retry_after` s."""

    retry_after: float


@dataclass(frozen=True, slots=True)
class Backoff:
    start: float = BACKOFF_START
    limit: float = BACKOFF_MAX

    def next(self, delay: float) -> float:
        return min(delay * 2, self.limit)

    def after_refusal(self, refused: RefusedForNow) -> float:
        """What a temporary refusal waits: what the server asked, at least
        `start`, and up to half more at random, so that a fleet refused together
        (a restart) does not come back together."""
        return max(refused.retry_after, self.start) * random.uniform(1.0, 1.5)  # noqa: S311


@contextmanager
def directory_lock(data_dir: Path) -> Iterator[None]:
    """One worker per directory: an exclusive, non-blocking flock, released
    by the kernel when the process ends however it ends."""
    data_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another worker is already running in {data_dir}") from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(descriptor)


def run_loop(ctx: TaskContext, *, fleet: bool, backoff: Backoff = Backoff()) -> int:
    """Play tasks until told to stop; the process exit code."""
    delay = backoff.start
    while True:
        if _stop_file(ctx):
            return 0
        outcome = iteration(ctx)
        if ctx.control.stopping.is_set():
            log.info("stopped (%s)", ctx.control.reason)
            return 0
        if isinstance(outcome, RefusedForNow):
            pause = backoff.after_refusal(outcome)
            log.info("the server refused for now; asking again in %.0f s", pause)
            _activity(ctx, f"waiting {pause:.0f} s: the server asked workers to come back later")
            if _wait(ctx, pause):
                return 0
            continue
        if outcome is Outcome.EXIT:
            return 1
        if outcome is Outcome.DONE:
            delay = backoff.start
            continue
        if fleet:
            log.info("%s: exiting (fleet mode)", outcome.value)
            return 0
        log.info("waiting %.0f s before asking again", delay)
        _activity(ctx, f"waiting {delay:.0f} s before asking again: {outcome.value}")
        if _wait(ctx, delay):
            if ctx.control.stopping.is_set():
                log.info("stopped (%s)", ctx.control.reason)
            return 0
        delay = backoff.next(delay)


def _stopped_because(ctx: TaskContext, reason: str) -> None:
    if ctx.state is not None:
        ctx.state.stopped(reason)


def _stop_file(ctx: TaskContext) -> bool:
    path = ctx.config.data_dir / STOP_FILE
    if not path.exists():
        return False
    path.unlink(missing_ok=True)  # honoured once: the next start runs
    log.info("found %s: stopping", path)
    return True


def _wait(ctx: TaskContext, seconds: float) -> bool:
    """Sleep, waking each second for a signal or the stop file; True: stop."""
    remaining = seconds
    while remaining > 0:
        if ctx.control.wait(min(1.0, remaining)):
            return True
        if (ctx.config.data_dir / STOP_FILE).exists():
            return _stop_file(ctx)
        remaining -= 1.0
    return False


def _activity(ctx: TaskContext, text: str) -> None:
    if ctx.state is not None:
        ctx.state.activity(text)


def iteration(ctx: TaskContext) -> Outcome | RefusedForNow:
    _activity(ctx, "asking the server for work")
    refused = _check_version(ctx)
    if refused is not None:
        return refused
    ctx.engines.prune()
    try:
        reply = ctx.client.request_task()
    except TemporaryRefusalError as refusal:
        log.info("request_task: %s", refusal)
        return RefusedForNow(refusal.retry_after)
    except WorkerError as error:
        log.warning("request_task failed: %s", error)
        return Outcome.FAILED
    if "error" in reply:
        return Outcome.FAILED
    if "task_id" not in reply:
        return Outcome.NO_TASK
    return play(ctx, reply)


def _check_version(ctx: TaskContext) -> Outcome | RefusedForNow | None:
    """request_version, and self-update on a newer protocol (RestartWorker once
    the new worker is current); the outcome when this iteration ends here."""
    try:
        version = ctx.client.request_version()
    except TemporaryRefusalError as refusal:
        log.info("request_version: %s", refusal)
        return RefusedForNow(refusal.retry_after)
    except CredentialsError as error:
        log.error("the server refused the credentials: %s", error)
        _stopped_because(ctx, f"the server refused the credentials: {error}")
        return Outcome.EXIT
    except WorkerError as error:
        log.warning("cannot reach the server: %s", error)
        return Outcome.FAILED
    if version > WORKER_VERSION:
        _newer_protocol(ctx, version)
        if ctx.control.stopping.is_set():  # a signal during the update
            return Outcome.FAILED
    return None


def _newer_protocol(ctx: TaskContext, version: int) -> None:
    """Self-update (raises RestartWorker once the new worker is current), or
    only say so when the worker has no updater."""
    if ctx.updater is not None:
        ctx.updater.on_server_protocol(version)
        return
    log.warning(
        "the server speaks protocol %d, this worker %d: please upgrade", version, WORKER_VERSION
    )


def play(ctx: TaskContext, reply: dict[str, Any]) -> Outcome:
    """Play one assigned task and close it as its ending requires (reference 1.4)."""
    run = reply.get("run")
    run_id = str(run.get("_id", "")) if isinstance(run, dict) else ""
    task_id = reply.get("task_id")
    if not run_id or not isinstance(task_id, int):
        log.error("request_task gave a task without run or task id: %r", reply)
        return Outcome.FAILED
    ctx.control.start_task(run_id, task_id)
    _activity(ctx, f"preparing task {task_id} of run {run_id}: builds, nets, book, bench")
    try:
        assignment = parse_assignment(reply)
        log.info(
            "task %d of run %s: %d games of %s (tc %s)",
            task_id,
            run_id,
            assignment.num_games,
            assignment.label,
            assignment.tc,
        )
        run_task(ctx, assignment)
        return Outcome.DONE
    except RunError as error:
        log.error("stopping run %s: %s", run_id, error)
        _close(ctx, "stop_run", run_id, task_id, str(error))
        return Outcome.FAILED
    except FatalError as error:
        log.error("task %d failed, and the worker stops: %s", task_id, error)
        _close(ctx, "failed_task", run_id, task_id, str(error))
        _stopped_because(ctx, str(error))
        return Outcome.EXIT
    except WorkerError as error:
        log.error("task %d failed: %s", task_id, error)
        _close(ctx, "failed_task", run_id, task_id, str(error))
        return Outcome.FAILED
    except Exception as error:  # a bug: report it where people will see it, then stop
        log.exception("unexpected error in task %d", task_id)
        _close(ctx, "failed_task", run_id, task_id, bug_message(error))
        _stopped_because(ctx, f"{bug_message(error)} (see worker.log)")
        return Outcome.EXIT
    finally:
        ctx.control.end_task()
        ctx.status.done()


def _close(ctx: TaskContext, how: str, run_id: str, task_id: int, message: str) -> None:
    try:
        if how == "stop_run":
            ctx.client.stop_run(run_id, task_id, message)
        else:
            ctx.client.failed_task(run_id, task_id, message)
    except TransportError as error:
        log.warning("%s could not be sent: %s", how, error)


def bug_message(error: BaseException) -> str:
    """`Exception X at file:line WorkerVersion: N`, as the reference reports bugs."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"Exception {type(error).__name__}: {error} at {where} WorkerVersion: {WORKER_VERSION}"
