"""The worker's side of the protocol: one method per endpoint (reference 1.2, 1.4).

Bodies are built from the protocol's own request structs, so client and
server agree on every field. Every POST must answer a JSON object; anything
else (a proxy's plain-text 502, a dropped connection) is a TransportError,
which `update_task` retries. A 429 or 503 is a TemporaryRefusalError (the server
is busy, restarting or throttling, and says when to come back): the calls
that close or report a task wait its Retry-After and send again, for up to
TEMPORARY_PATIENCE, without using up an attempt. A reply with `error` is
returned to the caller or raised as ServerError, per endpoint, as the
reference worker does.

Thread-safe: the main thread and the heartbeat thread share one client
(httpx's pool is thread-safe; `worker_info` is replaced, never mutated).
The HTTP transport can be injected (tests use httpx's MockTransport).
"""

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
import msgspec

from arbiter import __version__
from arbiter.protocol import TEMPORARY_STATUSES
from arbiter.protocol.messages import (
    BeatRequest,
    FailedTaskRequest,
    RequestSpsaRequest,
    RequestTaskRequest,
    SpsaResult,
    Stats,
    StopRunRequest,
    UpdateTaskRequest,
    UploadPgnRequest,
    VersionRequest,
    WorkerIdentity,
    WorkerInfo,
    WorkerLogRequest,
)
from arbiter.worker.errors import CredentialsError, WorkerError

log = logging.getLogger("arbiter.worker.api")

HTTP_TIMEOUT = 30.0  # s, per request (reference 11)
UPDATE_ATTEMPTS = 5  # update_task tries on transport failures (reference 1.4)
UPDATE_RETRY_DELAY = 15.0  # s between them
# s a task's report or closing keeps being sent while the server refuses it
# for now: longer than a restart or an overload episode lasts
TEMPORARY_PATIENCE = 900.0
RETRY_AFTER_BOUNDS = (1.0, 120.0)  # s: a Retry-After outside them is brought inside


@dataclass(frozen=True, slots=True)
class Reported:
    """update_task's answer: whether the task goes on, and the run's SPRT LLR
    after the report (None: no SPRT, or a server that does not say)."""

    alive: bool
    llr: float | None = None


class TransportError(WorkerError):
    """No usable reply: a network error, or a body that is not a JSON object."""


class TemporaryRefusalError(TransportError):
    """The server refused the call for now (HTTP 429 or 503); `retry_after` is
    how long it asked us to wait, in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_of(reply: httpx.Response) -> float:
    """The reply's Retry-After in seconds (a number of seconds; a date or
    nothing counts as the lower bound), within RETRY_AFTER_BOUNDS."""
    low, high = RETRY_AFTER_BOUNDS
    try:
        seconds = float(reply.headers.get("retry-after", ""))
    except ValueError:
        return low
    return min(max(seconds, low), high) if math.isfinite(seconds) else low


class ServerError(WorkerError):
    """The server answered with `error`; the message is the server's."""


class NotFoundError(WorkerError):
    """A download the server does not have (HTTP 404)."""


class ApiClient:
    def __init__(
        self,
        server: str,
        password: str,
        worker_info: WorkerInfo,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = HTTP_TIMEOUT,
        wait: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = httpx.Client(
            base_url=server,
            transport=transport,
            timeout=timeout,
            follow_redirects=True,
            headers={"user-agent": f"arbiter-worker/{__version__}"},
        )
        self.server = server
        self._password = password
        self._wait = wait
        self._clock = clock
        self.worker_info = worker_info
        self.last_contact = clock()  # of the last JSON reply; the heartbeat's clock

    def close(self) -> None:
        self._http.close()

    # ---------------------------------------------------------------- transport

    def post(self, path: str, body: msgspec.Struct) -> dict[str, Any]:
        """POST a request struct; the reply object. Never logs the body (a credential)."""
        started = time.monotonic()
        try:
            reply = self._http.post(
                path,
                content=msgspec.json.encode(body),
                headers={"content-type": "application/json"},
            )
        except httpx.HTTPError as error:
            raise TransportError(f"{path}: {type(error).__name__}: {error}") from None
        try:
            data = msgspec.json.decode(reply.content)
        except msgspec.DecodeError:
            data = None
        if reply.status_code in TEMPORARY_STATUSES:
            said = data if isinstance(data, str) else reply.text[:200]
            raise TemporaryRefusalError(
                f"{path}: HTTP {reply.status_code}, refused for now: {said}",
                retry_after_of(reply),
            )
        if not isinstance(data, dict):
            snippet = reply.text[:200]
            raise TransportError(
                f"{path}: HTTP {reply.status_code}, not a JSON object: {snippet!r}"
            )
        self.last_contact = self._clock()
        server_time = data.get("duration")
        log.info(
            "%s: HTTP %d in %.3f s (server %.3f s)",
            path,
            reply.status_code,
            time.monotonic() - started,
            server_time if isinstance(server_time, int | float) else math.nan,
        )
        if "info" in data:
            log.info("%s: %s", path, data["info"])
        if "error" in data:
            log.warning("%s: %s", path, data["error"])
        return data

    def post_patiently(self, path: str, body: msgspec.Struct) -> dict[str, Any]:
        """`post`, sent again after each TemporaryRefusalError's Retry-After (a little
        more, at random, so a fleet refused together does not come back
        together) until TEMPORARY_PATIENCE has passed."""
        deadline = self._clock() + TEMPORARY_PATIENCE
        while True:
            try:
                return self.post(path, body)
            except TemporaryRefusalError as refusal:
                pause = refusal.retry_after * random.uniform(1.0, 1.5)  # noqa: S311 - jitter
                if self._clock() + pause > deadline:
                    raise
                log.warning("%s; sending again in %.0f s", refusal, pause)
                self._wait(pause)

    def get(self, path: str) -> bytes:
        """A file from the server (books, nets); follows redirects."""
        content = self._fetch(path, "the server has no such file")
        self.last_contact = self._clock()
        return content

    def download(self, url: str) -> bytes:
        """A file from another host (catalogue books): not a sign of the server's life."""
        return self._fetch(url, "no such file")

    def _fetch(self, target: str, missing: str) -> bytes:
        try:
            reply = self._http.get(target)
        except httpx.HTTPError as error:
            raise TransportError(f"{target}: {type(error).__name__}: {error}") from None
        if reply.status_code == 404:
            raise NotFoundError(f"{target}: {missing}")
        if reply.status_code != 200:
            raise TransportError(f"{target}: HTTP {reply.status_code}")
        return reply.content

    def get_json(self, path: str) -> dict[str, Any]:
        try:
            data = msgspec.json.decode(self.get(path))
        except msgspec.DecodeError:
            data = None
        if not isinstance(data, dict):
            raise TransportError(f"{path}: not a JSON object")
        return data

    # ---------------------------------------------------------------- endpoints

    def request_version(self) -> int:
        """The server's protocol version; CredentialsError when it refuses us."""
        body = VersionRequest(self._password, WorkerIdentity(self.worker_info.username))
        data = self.post("/api/request_version", body)
        if "error" in data:
            raise CredentialsError(_message(data["error"]))
        version = data.get("version")
        if not isinstance(version, int):
            raise TransportError(f"/api/request_version: no version in {data!r}")
        return version

    def request_task(self) -> dict[str, Any]:
        return self.post("/api/request_task", RequestTaskRequest(self._password, self.worker_info))

    def update_task(
        self, run_id: str, task_id: int, stats: Stats, spsa: SpsaResult | None = None
    ) -> Reported:
        """Report cumulative stats; whether the task is still alive, and the LLR.

        Transport failures are retried (5 tries, 15 s apart), temporary
        refusals after their Retry-After (`post_patiently`); an `error` in the
        reply raises ServerError, which fails the task.
        """
        body = UpdateTaskRequest(self._password, self.worker_info, run_id, task_id, stats, spsa)
        for attempt in range(1, UPDATE_ATTEMPTS + 1):
            try:
                data = self.post_patiently("/api/update_task", body)
                break
            except TransportError as failure:
                if attempt == UPDATE_ATTEMPTS:
                    raise
                log.warning("update_task attempt %d failed (%s); retrying", attempt, failure)
                self._wait(UPDATE_RETRY_DELAY)
        if "error" in data:
            raise ServerError(_message(data["error"]))
        return Reported(data.get("task_alive") is True, _finite_number(data.get("llr")))

    def beat(self, run_id: str, task_id: int) -> bool:
        """Renew the task's lease; False when the task is gone or refused."""
        data = self.post(
            "/api/beat", BeatRequest(self._password, self.worker_info, run_id, task_id)
        )
        return "error" not in data and data.get("task_alive") is True

    def request_spsa(self, run_id: str, task_id: int) -> dict[str, Any]:
        body = RequestSpsaRequest(self._password, self.worker_info, run_id, task_id)
        data = self.post_patiently("/api/request_spsa", body)
        if "error" in data:
            raise ServerError(_message(data["error"]))
        return data

    def failed_task(self, run_id: str, task_id: int, message: str) -> dict[str, Any]:
        body = FailedTaskRequest(self._password, self.worker_info, run_id, task_id, message)
        return self.post_patiently("/api/failed_task", body)

    def stop_run(self, run_id: str, task_id: int, message: str) -> dict[str, Any]:
        body = StopRunRequest(self._password, self.worker_info, run_id, task_id, message)
        return self.post_patiently("/api/stop_run", body)

    def upload_pgn(self, run_id: str, task_id: int, pgn_base64: str) -> dict[str, Any]:
        body = UploadPgnRequest(self._password, self.worker_info, run_id, task_id, pgn_base64)
        return self.post_patiently("/api/upload_pgn", body)

    def worker_log(
        self, message: str, run_id: str | None = None, task_id: int | None = None
    ) -> dict[str, Any]:
        body = WorkerLogRequest(self._password, self.worker_info, message, run_id, task_id)
        return self.post("/api/worker_log", body)


def _finite_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _message(error: object) -> str:
    return error if isinstance(error, str) else repr(error)
