"""The reference's wire documents, described by hand: for each document, the keys
it always carries, the keys it may carry, and the JSON type of each value.

Written from reading the reference's schemas (runs, tasks, actions, worker_info)
and the code that shapes its API replies (fishtest-reference §1, §3). Only what a
client can rely on is described: every key the reference sends, with its type.
Arbiter may send more keys; it must never drop, rename or retype one.

Numbers follow the reference's validator, for which a float also accepts an
int (a run's default `itp` is stored as 100). An int is never a float, and a
bool is never a number, although Python would let both pass.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class Shape(Protocol):
    def problems(self, value: Any, where: str) -> list[str]: ...


@dataclass(frozen=True)
class Scalar:
    """A leaf: `name` says what is expected, `accepts` decides."""

    name: str
    accepts: Callable[[Any], bool]

    def problems(self, value: Any, where: str) -> list[str]:
        return [] if self.accepts(value) else [f"{where}: expected {self.name}, got {value!r}"]


def pattern(name: str, regex: str) -> Scalar:
    compiled = re.compile(regex)
    return Scalar(name, lambda v: type(v) is str and compiled.fullmatch(v) is not None)


def one_of(*values: str) -> Scalar:
    return Scalar(" or ".join(map(repr, values)), lambda v: type(v) is str and v in values)


INT = Scalar("an int", lambda v: type(v) is int)
NUMBER = Scalar("a number", lambda v: type(v) in (int, float))
BOOL = Scalar("a bool", lambda v: type(v) is bool)
STR = Scalar("a string", lambda v: type(v) is str)
# An ObjectId as the reference prints it: what clients pass back, and parse.
OBJECT_ID = pattern("24 hex digits", r"[0-9a-f]{24}")
# str() of a timezone-aware UTC datetime (MongoDB keeps milliseconds; str()
# leaves out a zero fraction).
UTC_TEXT = pattern(
    "a UTC datetime as str() prints it", r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?\+00:00"
)
NET_NAME = pattern("a net name", r"nn-[0-9a-f]{12}\.nnue")


@dataclass(frozen=True)
class ListOf:
    item: Shape

    def problems(self, value: Any, where: str) -> list[str]:
        if type(value) is not list:
            return [f"{where}: expected a list, got {value!r}"]
        return [p for i, v in enumerate(value) for p in self.item.problems(v, f"{where}[{i}]")]


@dataclass(frozen=True)
class Row:
    """A list of exactly these items (pentanomial, versions, architecture)."""

    items: tuple[Shape, ...]

    def problems(self, value: Any, where: str) -> list[str]:
        if type(value) is not list or len(value) != len(self.items):
            return [f"{where}: expected a list of {len(self.items)}, got {value!r}"]
        pairs = zip(self.items, value, strict=True)
        return [p for i, (s, v) in enumerate(pairs) for p in s.problems(v, f"{where}[{i}]")]


def row(shape: Shape, length: int) -> Row:
    return Row((shape,) * length)


@dataclass(frozen=True)
class Either:
    shapes: tuple[Shape, ...]

    def problems(self, value: Any, where: str) -> list[str]:
        found = [shape.problems(value, where) for shape in self.shapes]
        return [] if any(not p for p in found) else [p for ps in found for p in ps]


@dataclass(frozen=True)
class Obj:
    """A JSON object: `required` keys always present, `optional` ones typed when
    present; `together` lists keys that come all or none, `exactly_one` keys of
    which exactly one is present."""

    required: Mapping[str, Shape]
    optional: Mapping[str, Shape] = field(default_factory=dict)
    together: tuple[str, ...] = ()
    exactly_one: tuple[str, ...] = ()

    def extended(
        self,
        required: Mapping[str, Shape] | None = None,
        optional: Mapping[str, Shape] | None = None,
    ) -> "Obj":
        return Obj(
            {**self.required, **(required or {})},
            {**self.optional, **(optional or {})},
            self.together,
            self.exactly_one,
        )

    def problems(self, value: Any, where: str) -> list[str]:
        if type(value) is not dict:
            return [f"{where}: expected an object, got {value!r}"]
        found = [f"{where}.{key}: missing" for key in self.required if key not in value]
        for key, shape in {**self.required, **self.optional}.items():
            if key in value:
                found += shape.problems(value[key], f"{where}.{key}")
        present = [key for key in self.together if key in value]
        if present and len(present) != len(self.together):
            found.append(f"{where}: {self.together} come together, only {present} present")
        if self.exactly_one and sum(key in value for key in self.exactly_one) != 1:
            found.append(f"{where}: exactly one of {self.exactly_one} expected")
        return found


def problems(value: Any, shape: Shape, where: str = "$") -> list[str]:
    """Every way `value` falls short of `shape` (empty when it is compatible)."""
    return shape.problems(value, where)


# ---------------------------------------------------------------- results, workers

RESULTS = Obj(
    {
        "wins": INT,
        "losses": INT,
        "draws": INT,
        "crashes": INT,
        "time_losses": INT,
        "pentanomial": row(INT, 5),
    }
)

# What a worker sends in every call.
WORKER_INFO = Obj(
    {
        "uname": STR,
        "architecture": row(STR, 2),
        "concurrency": INT,
        "max_memory": INT,
        "min_threads": INT,
        "username": STR,
        "version": INT,
        "python_version": row(INT, 3),
        "gcc_version": row(INT, 3),
        "compiler": one_of("g++", "clang++"),
        "unique_key": STR,
        "modified": BOOL,
        "worker_arch": STR,
        "ARCH": STR,
        "nps": NUMBER,
        "near_github_api_limit": BOOL,
    }
)

# ...and what a task keeps of it: the server adds where the worker called from.
TASK_WORKER_INFO = WORKER_INFO.extended({"remote_addr": STR, "country_code": STR})

# ---------------------------------------------------------------- runs

OVERSHOOT = Obj(
    {
        "last_update": INT,
        "skipped_updates": INT,
        "ref0": NUMBER,
        "m0": NUMBER,
        "sq0": NUMBER,
        "ref1": NUMBER,
        "m1": NUMBER,
        "sq1": NUMBER,
    }
)

SPRT = Obj(
    {
        "alpha": NUMBER,
        "beta": NUMBER,
        "elo0": NUMBER,
        "elo1": NUMBER,
        "elo_model": STR,
        "state": one_of("", "accepted", "rejected"),
        "llr": NUMBER,
        "batch_size": INT,
        "lower_bound": NUMBER,
        "upper_bound": NUMBER,
    },
    {"lost_samples": INT, "illegal_update": INT, "overshoot": OVERSHOOT},
    exactly_one=("overshoot", "lost_samples"),
)

SPSA_PARAM = Obj(
    {
        "name": STR,
        **dict.fromkeys(("start", "min", "max", "c_end", "r_end", "c", "a_end", "a"), NUMBER),
        "theta": NUMBER,
    }
)

SPSA_SAMPLE = Obj({"theta": NUMBER, "R": NUMBER, "c": NUMBER})

SPSA = Obj(
    {
        "A": NUMBER,
        "alpha": NUMBER,
        "gamma": NUMBER,
        "raw_params": STR,
        "iter": INT,
        "num_iter": INT,
        "params": ListOf(SPSA_PARAM),
    },
    {"algorithm": STR, "param_history": ListOf(ListOf(SPSA_SAMPLE))},
)

ARGS = Obj(
    {
        "base_tag": STR,
        "new_tag": STR,
        "base_nets": ListOf(NET_NAME),
        "new_nets": ListOf(NET_NAME),
        "num_games": INT,
        "tc": STR,
        "new_tc": STR,
        "book": STR,
        "book_depth": STR,  # a number, as text
        "threads": INT,
        "resolved_base": STR,
        "resolved_new": STR,
        "msg_base": STR,
        "msg_new": STR,
        "base_options": STR,
        "new_options": STR,
        "info": STR,
        "base_signature": STR,  # bench node counts, as text
        "new_signature": STR,
        "username": STR,
        "tests_repo": STR,
        "auto_purge": BOOL,
        "throughput": NUMBER,
        "itp": NUMBER,
        "priority": NUMBER,
        "adjudication": BOOL,
    },
    {
        "master_repo": STR,
        "arch_filter": STR,
        "compiler": one_of("g++", "clang++"),
        "sprt": SPRT,
        "spsa": SPSA,
    },
)

# A run as /api/active_runs and /api/finished_runs list it: the reference
# leaves tasks and bad tasks out of these (a client must not count on them).
LISTED_RUN = Obj(
    {
        "_id": OBJECT_ID,
        "version": INT,
        "start_time": UTC_TEXT,
        "last_updated": UTC_TEXT,
        "tc_base": NUMBER,
        "approved": BOOL,
        "approver": STR,
        "finished": BOOL,
        "deleted": BOOL,
        "failed": BOOL,
        "failures": INT,
        "is_green": BOOL,
        "is_yellow": BOOL,
        "workers": INT,
        "cores": INT,
        "committed_games": INT,
        "total_games": INT,
        "results": RESULTS,
        "nps": NUMBER,
        "games_per_minute": NUMBER,
        "args": ARGS,
    },
    {"rescheduled_from": OBJECT_ID},
)

# /api/get_run: the same with tasks and bad tasks emptied.
RUN = LISTED_RUN.extended({"tasks": Row(()), "bad_tasks": Row(())})

# The run version the reference's run shape carries (its RUN_VERSION).
RUN_VERSION = 24

# ---------------------------------------------------------------- tasks

TASK = Obj(
    {
        "num_games": INT,
        "active": BOOL,
        "last_updated": UTC_TEXT,
        "start": INT,
        "stats": RESULTS,
        "worker_info": TASK_WORKER_INFO,
    },
    {
        "bad": BOOL,
        # Only while an SPSA task waits for its result; JSON has no bytes.
        "spsa_params": Obj({"iter": INT, "packed_flips": ListOf(INT)}),
    },
)

# /api/get_task/<id>/<n>bad: a purged task as the run keeps it.
BAD_TASK = TASK.extended(
    {
        "residual": Either((NUMBER, one_of("inf"))),
        "residual_color": one_of("green", "yellow", "red"),
        "bad": BOOL,
        "task_id": INT,
    }
)

# ---------------------------------------------------------------- actions

_ACTION = Obj({"_id": OBJECT_ID, "time": NUMBER, "action": STR, "username": STR})
_RUN = {"run_id": OBJECT_ID, "run": STR}
_TASK = {"worker": STR, "task_id": INT}
_MESSAGE = {"message": STR}


def _action(*parts: Mapping[str, Shape], optional: Mapping[str, Shape] | None = None) -> Obj:
    required: dict[str, Shape] = {}
    for part in parts:
        required.update(part)
    return _ACTION.extended(required, optional)


ACTIONS: dict[str, Obj] = {
    "failed_task": _action(_RUN, _TASK, _MESSAGE),
    "crash_or_time": _action(_RUN, _TASK, _MESSAGE),
    "dead_task": _action(_RUN, _TASK),
    "system_event": _action(_MESSAGE),
    "new_run": _action(_RUN, _MESSAGE),
    "upload_nn": _action({"nn": NET_NAME}),
    "modify_run": _action(_RUN, _MESSAGE),
    "delete_run": _action(_RUN),
    "stop_run": Obj(
        {**_ACTION.required, **_RUN, **_MESSAGE}, _TASK, together=("worker", "task_id")
    ),
    "finished_run": _action(_RUN, _MESSAGE),
    "approve_run": _action(_RUN, {"message": one_of("approved", "unapproved")}),
    "purge_run": _action(_RUN, _MESSAGE),
    "block_user": _action({"user": STR, "message": one_of("blocked", "unblocked")}),
    "accept_user": _action({"user": STR, "message": one_of("accepted")}),
    "block_worker": _action({"worker": STR, "message": one_of("blocked", "unblocked")}),
    "log_message": _action(_MESSAGE, optional={"worker": STR}),
    "worker_log": Obj(
        {**_ACTION.required, "worker": STR, **_MESSAGE},
        {**_RUN, "task_id": INT},
        together=("run_id", "run"),
    ),
}

# ---------------------------------------------------------------- worker replies

_TIMED = {"duration": NUMBER}
_NOTES = {"info": STR, "error": STR}

REQUEST_VERSION = Obj({"version": INT, **_TIMED})

REQUEST_TASK = Obj(
    {
        "run": Obj(
            {
                "_id": OBJECT_ID,
                "args": ARGS.extended({"book_sri": STR}),
                "my_task": Obj({"num_games": INT, "start": INT}, {"stats": RESULTS}),
            }
        ),
        "task_id": INT,
        **_TIMED,
    }
)

NO_TASK = Obj({"task_waiting": BOOL, **_TIMED}, _NOTES)

# update_task, beat; failed_task and request_spsa when the task is gone. An
# update of an SPRT run adds the run's LLR (the reference sends no such key).
TASK_ALIVE = Obj({"task_alive": BOOL, **_TIMED}, {**_NOTES, "llr": NUMBER})

REQUEST_SPSA = Obj(
    {
        "w_params": ListOf(
            Obj({"name": STR, "value": NUMBER, "c": NUMBER, "R": NUMBER, "flip": INT})
        ),
        "b_params": ListOf(Obj({"name": STR, "value": NUMBER})),
        "sig": INT,
        "task_alive": BOOL,
        **_TIMED,
    }
)

# failed_task, stop_run, upload_pgn, worker_log when they succeed.
DONE = Obj(_TIMED)

ERROR = Obj({"error": STR, **_TIMED})

# /api/rate_limit: the reference's snapshot of its GitHub API budget.
RATE_LIMIT = Obj(
    {
        "limit": INT,
        "remaining": INT,
        "reset": INT,
        "used": INT,
        "resource": STR,
        "_uninitialized": BOOL,
    }
)
