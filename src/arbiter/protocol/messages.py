"""Typed request bodies of the worker API, validated at the boundary with msgspec.

Unknown fields are allowed (a newer worker may send more), wrong types are not.
The constraints are Fishtest's (protocol 325), so a body Fishtest accepts is
accepted here. Where Fishtest has no upper bound on a number, we add a generous
one: a value that cannot be stored (it would overflow a 32-bit column) or that
is infinite (JSON `1e999`) is a 400 at the door instead of a 500 deep inside.
"""

import re
from typing import Annotated, Any, Literal, TypeVar, get_args

import msgspec

# `\Z` rather than `$`: `$` also matches before a trailing newline.
USERNAME_PATTERN = r"^[A-Za-z0-9]{2,}\Z"
# Per-process UUID; the first group is a stable, user-chosen prefix.
UNIQUE_KEY_PATTERN = r"^[0-9a-zA-Z]{2,8}(-[a-f0-9]{4}){3}-[a-f0-9]{12}\Z"
RUN_ID_PATTERN = r"^[0-9a-f]{24}\Z"

# The ARCH values of Stockfish's Makefile that a worker may report (from
# Stockfish's native-properties script), plus "unknown" when detection failed.
# `arch_filter` of a run must match at least one of them.
SupportedArch = Literal[
    "x86-64-avx512icl",
    "x86-64-vnni512",
    "x86-64-avx512",
    "x86-64-avxvnni",
    "x86-64-bmi2",
    "x86-64-avx2",
    "x86-64-sse41-popcnt",
    "x86-64-modern",
    "x86-64-ssse3",
    "x86-64-sse3-popcnt",
    "x86-64",
    "x86-32-sse41-popcnt",
    "x86-32-sse2",
    "x86-32",
    "ppc-64",
    "ppc-64-altivec",
    "ppc-64-vsx",
    "ppc-32",
    "armv7",
    "armv7-neon",
    "armv8",
    "armv8-dotprod",
    "e2k",
    "apple-silicon",
    "general-64",
    "general-32",
    "riscv64",
    "loongarch64",
    "loongarch64-lsx",
    "loongarch64-lasx",
]
WorkerArch = Literal[SupportedArch, "unknown"]
SUPPORTED_ARCHS: tuple[str, ...] = get_args(SupportedArch)
WORKER_ARCHS: tuple[str, ...] = get_args(WorkerArch)

MAX_INT32 = 2**31 - 1
MAX_UINT32 = 2**32 - 1
# Nodes per second of one thread: today's CPUs do a few million.
MAX_NPS = 1e12

Username = Annotated[str, msgspec.Meta(pattern=USERNAME_PATTERN)]
UniqueKey = Annotated[str, msgspec.Meta(pattern=UNIQUE_KEY_PATTERN)]
RunId = Annotated[str, msgspec.Meta(pattern=RUN_ID_PATTERN)]
TaskId = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT32)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT32)]
Positive = Annotated[int, msgspec.Meta(gt=0, le=MAX_INT32)]
Compiler = Literal["g++", "clang++"]


class BodyError(ValueError):
    """A request body that does not fit its schema; the message names the field."""


class WorkerIdentity(msgspec.Struct):
    username: Username


class VersionRequest(msgspec.Struct):
    """`request_version`: only credentials, checked with the lax schema."""

    password: str
    worker_info: WorkerIdentity


class WorkerInfo(msgspec.Struct):
    """The full `worker_info` every endpoint but `request_version` carries.

    All keys are mandatory (reference 1.1). The server adds `remote_addr` and
    `country_code` when it stores a copy in a task; the worker never sends them.
    """

    uname: str
    architecture: tuple[str, str]
    concurrency: Positive
    max_memory: Count  # MiB
    min_threads: Positive
    username: Username
    version: Count
    python_version: tuple[int, int, int]
    gcc_version: tuple[int, int, int]  # of the selected compiler, g++ or clang++
    compiler: Compiler
    unique_key: UniqueKey
    modified: bool
    worker_arch: WorkerArch
    ARCH: str  # CPU features printed by the engine; "?" before the first task
    nps: Annotated[float, msgspec.Meta(ge=0, le=MAX_NPS)]
    near_github_api_limit: bool
    # Arbiter's worker only: it downloads books from the server too, and builds
    # engines from any git repository, so it can play runs on books outside the
    # official-stockfish/books catalogue and on repositories not on GitHub. The
    # official worker does not send it.
    hosted_books: bool = False
    # Arbiter's worker only: the nodes per second per thread its engines
    # searched at in this task's games (0 until it has measured enough), set
    # beside `nps`, the bench figure that scales the time control. The health
    # check compares the two (domain/health.py).
    game_nps: Annotated[float, msgspec.Meta(ge=0, le=MAX_NPS)] = 0.0


class Stats(msgspec.Struct):
    """Cumulative results of one task.

    Only the shape is checked here; whether the numbers are consistent with each
    other (W+L+D = 2·Σ pentanomial, ...) is checked by the result service with
    `arbiter.stats` (which this package may not import): a 400 that leaves the
    task active, as the reference's request schema answers it.
    """

    wins: Count
    losses: Count
    draws: Count
    crashes: Count
    time_losses: Count
    pentanomial: Annotated[list[Count], msgspec.Meta(min_length=5, max_length=5)]


class SpsaResult(msgspec.Struct):
    """The SPSA batch a worker reports with `update_task`; `sig` echoes the
    crc32 that `request_spsa` handed out."""

    wins: Count
    losses: Count
    draws: Count
    num_games: Count
    sig: Annotated[int, msgspec.Meta(ge=0, le=MAX_UINT32)]

    def __post_init__(self) -> None:
        # Raised as ValueError so msgspec reports it with the path ("spsa: ...").
        if self.num_games % 2:
            raise ValueError("num_games must be even")
        if self.wins + self.losses + self.draws != self.num_games:
            raise ValueError("wins + losses + draws must equal num_games")


class WorkerRequest(msgspec.Struct):
    """Credentials and the full worker_info: the part every task call shares."""

    password: str
    worker_info: WorkerInfo


class RequestTaskRequest(WorkerRequest):
    pass


class TaskRequest(WorkerRequest):
    """A call about one task of one run."""

    run_id: RunId
    task_id: TaskId


class UpdateTaskRequest(TaskRequest):
    stats: Stats
    spsa: SpsaResult | None = None


class BeatRequest(TaskRequest):
    pass


class RequestSpsaRequest(TaskRequest):
    pass


class FailedTaskRequest(TaskRequest):
    message: str = ""


class StopRunRequest(TaskRequest):
    message: str


class UploadPgnRequest(TaskRequest):
    pgn: str  # base64 of gzip bytes; decoded and checked by the upload service


class WorkerLogRequest(WorkerRequest):
    """`worker_log`: a message, optionally about a task the worker owns."""

    message: str
    run_id: RunId | None = None
    task_id: TaskId | None = None

    def __post_init__(self) -> None:
        check_task_reference(self.run_id, self.task_id)


def check_task_reference(run_id: str | None, task_id: int | None) -> None:
    """A task is named by both ids or by neither (reference 1.1/1.2).

    Raises BodyError, a ValueError, so msgspec also reports it from
    `__post_init__`; the message starts with the field to fix.
    """
    if run_id is not None and task_id is None:
        raise BodyError("task_id: required when run_id is given")
    if task_id is not None and run_id is None:
        raise BodyError("run_id: required when task_id is given")


Body = TypeVar("Body")

_AT_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")


def decode_body(payload: dict[str, Any], kind: type[Body]) -> Body:
    try:
        return msgspec.convert(payload, type=kind, strict=True)
    except msgspec.ValidationError as error:
        raise BodyError(_describe(str(error))) from None


def _describe(message: str) -> str:
    # msgspec adds no " - at `$`" suffix for problems at the top level.
    match = _AT_PATH.search(message)
    detail = message if match is None else message[: match.start()]
    field = "" if match is None else match.group("path").replace("[", ".").replace("]", "")
    if detail.startswith("Object missing required field"):
        missing = detail.split("`")[1]
        field = f"{field}.{missing}" if field else missing
        return f"{field}: missing required field"
    if not field:
        # Top-level checks (__post_init__) already start with their field.
        return detail
    return f"{field}: {detail[0].lower()}{detail[1:]}"
