"""Fakes shared by the worker tests: a scripted server behind httpx's MockTransport."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import msgspec

from arbiter.protocol.messages import (
    BeatRequest,
    FailedTaskRequest,
    RequestSpsaRequest,
    RequestTaskRequest,
    StopRunRequest,
    UpdateTaskRequest,
    UploadPgnRequest,
    VersionRequest,
    WorkerInfo,
    WorkerLogRequest,
    decode_body,
)
from arbiter.worker.client import ApiClient
from arbiter.worker.config import WorkerConfig
from arbiter.worker.host import Compiler
from arbiter.worker.identity import make_worker_info

# The server's request type of each worker endpoint: every body the client
# sends is decoded with the server's own validation.
REQUEST_TYPES: dict[str, type[msgspec.Struct]] = {
    "/api/request_version": VersionRequest,
    "/api/request_task": RequestTaskRequest,
    "/api/update_task": UpdateTaskRequest,
    "/api/beat": BeatRequest,
    "/api/request_spsa": RequestSpsaRequest,
    "/api/failed_task": FailedTaskRequest,
    "/api/stop_run": StopRunRequest,
    "/api/upload_pgn": UploadPgnRequest,
    "/api/worker_log": WorkerLogRequest,
}

RUN_ID = "6543210fedcba98765432100"


def worker_config(data_dir: Path = Path(), **changes: Any) -> WorkerConfig:
    values: dict[str, Any] = {
        "server": "http://arbiter.test",
        "username": "alice",
        "password": "secret",
        "concurrency": 1,
        "max_memory": 4000,
        "min_threads": 1,
        "uuid_prefix": "test",
        "fleet": False,
        "compiler": "",
        "data_dir": data_dir,
    }
    values.update(changes)
    return WorkerConfig(**values)


def worker_info() -> WorkerInfo:
    key = "test-1234-5678-9abc-def012345678"
    return make_worker_info(worker_config(), Compiler("g++", (12, 2, 0)), key, "x86-64")


Reply = dict[str, Any] | httpx.Response | Exception
Handler = Callable[[str, dict[str, Any]], Reply]


class FakeServer:
    """Answers POSTs with a handler(path, body) and GETs from `files`; records calls."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler = handler or (lambda _path, _body: {})
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.files: dict[str, bytes] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET":
            self.calls.append((path, {}))
            if path in self.files:
                return httpx.Response(200, content=self.files[path])
            return httpx.Response(404, json={"error": f"{path}: not found"})
        body = json.loads(request.content)
        decode_body(body, REQUEST_TYPES[path])  # raises if the server would refuse it
        self.calls.append((path, body))
        reply = self.handler(path, body)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, httpx.Response):
            return reply
        return httpx.Response(200, json={**reply, "duration": 0.001})

    def paths(self) -> list[str]:
        return [path for path, _ in self.calls]

    def client(self, **kwargs: Any) -> ApiClient:
        kwargs.setdefault("wait", lambda _seconds: None)
        return ApiClient(
            "http://arbiter.test",
            "secret",
            worker_info(),
            transport=httpx.MockTransport(self),
            **kwargs,
        )


def task_reply(task_id: int = 0, num_games: int = 8, start: int = 0, **args: Any) -> dict[str, Any]:
    """A request_task reply in the server's shape (scheduler._reply)."""
    run_args: dict[str, Any] = {
        "base_tag": "master",
        "new_tag": "patch",
        "base_nets": [],
        "new_nets": [],
        "num_games": 1000,
        "tc": "N=1000",
        "new_tc": "N=1000",
        "book": "test.epd",
        "book_depth": "8",
        "threads": 1,
        "resolved_base": "a" * 40,
        "resolved_new": "b" * 40,
        "base_options": "Hash=16",
        "new_options": "Hash=16",
        "base_signature": "",
        "new_signature": "",
        "tests_repo": "file:///tmp/repo",
        "adjudication": True,
        "book_sri": "",
    }
    run_args.update(args)
    stats = {"wins": 0, "losses": 0, "draws": 0, "crashes": 0, "time_losses": 0,
             "pentanomial": [0, 0, 0, 0, 0]}  # fmt: skip
    return {
        "run": {
            "_id": RUN_ID,
            "args": run_args,
            "my_task": {"num_games": num_games, "start": start, "stats": stats},
        },
        "task_id": task_id,
        "duration": 0.01,
    }
