"""Who this worker is on the wire: its `worker_info` and `unique_key`.

The protocol's own `WorkerInfo` struct is built here, so the worker sends
exactly the shape the server validates.
"""

import platform
import sys
import uuid
from typing import cast

import msgspec

from arbiter.protocol import WORKER_VERSION
from arbiter.protocol.messages import WORKER_ARCHS, WorkerArch, WorkerInfo
from arbiter.worker.config import WorkerConfig
from arbiter.worker.host import Compiler, uname


def new_unique_key(prefix: str) -> str:
    """`<prefix>-xxxx-xxxx-xxxx-xxxxxxxxxxxx`: the stable prefix, then a fresh
    uuid4 tail, so a restarted process is a new process of the same machine."""
    tail = str(uuid.uuid4()).split("-", 1)[1]
    return f"{prefix}-{tail}"


def make_worker_info(
    config: WorkerConfig,
    compiler: Compiler | None,
    unique_key: str,
    worker_arch: str,
    *,
    modified: bool = False,
) -> WorkerInfo:
    """`modified`: the worker's files differ from its install (`integrity`)."""
    bits, linkage = platform.architecture()
    major, minor, micro = sys.version_info[:3]
    return WorkerInfo(
        uname=uname(),
        architecture=(bits, linkage),
        concurrency=config.concurrency,
        max_memory=config.max_memory,
        min_threads=config.min_threads,
        username=config.username,
        version=WORKER_VERSION,
        python_version=(major, minor, micro),
        gcc_version=compiler.version if compiler is not None else (0, 0, 0),
        compiler="clang++" if compiler is not None and compiler.name == "clang++" else "g++",
        unique_key=unique_key,
        modified=modified,
        worker_arch=cast(WorkerArch, worker_arch if worker_arch in WORKER_ARCHS else "unknown"),
        ARCH="?",
        nps=0.0,
        near_github_api_limit=False,  # we never call GitHub's API
        hosted_books=True,  # books come from the server, or the catalogue's repository
    )


def with_game_nps(info: WorkerInfo, game_nps: float) -> WorkerInfo:
    """The same worker with the nps its engines searched at in its games (0: not yet)."""
    return msgspec.structs.replace(info, game_nps=game_nps)


def with_measurements(info: WorkerInfo, *, arch: str, nps: float) -> WorkerInfo:
    """The same worker after measuring its engine: CPU features and speed."""
    return msgspec.structs.replace(info, ARCH=arch, nps=round(nps, 1))
