"""Fishtest's other documents (users, actions, nets, PGNs, workers, kvstore) as
Arbiter rows. Pure functions: no storage, no clock."""

import re
from dataclasses import dataclass
from typing import Any

from arbiter.domain.actions import ACTION_NAMES
from arbiter.domain.errors import ValidationError
from arbiter.domain.profile_fields import check_username, username_key
from arbiter.importer.runs import Skip
from arbiter.importer.values import (
    id_time,
    integer,
    object_id_text,
    plain,
    sequence,
    text,
    timestamp,
)

APPROVERS_GROUP = "group:approvers"
NET_NAME = re.compile(r"nn-[0-9a-f]{12}\.nnue")
PGN_KEY = re.compile(r"([0-9a-f]{24})-(0|[1-9][0-9]*)")
GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MACHINE_LIMIT = 16
# Columns an action keeps; every other key of the document goes to its `data`.
ACTION_COLUMNS = frozenset(
    {"_id", "time", "action", "username", "message", "run_id", "run", "task_id", "worker", "user"}
)


@dataclass(frozen=True, slots=True)
class UserFields:
    """A user document without its password, which is hashed apart (`importer.users`)."""

    row: dict[str, Any]  # every column of `users` but id and password_hash
    password: str  # clear text, as Fishtest stores it: never written anywhere
    other_groups: tuple[str, ...]


def convert_user(document: dict[str, Any]) -> UserFields:
    username = document.get("username")
    if not isinstance(username, str) or not username.strip():
        raise Skip("no username")
    try:
        # Signup's rule, so no imported account can be a look-alike of another
        # (a Cyrillic "а"), carry markup or a newline, or be cut short at a NUL.
        check_username(username)
    except ValidationError:
        raise Skip("username breaks signup's rule (2 to 32 letters and digits)") from None
    groups = sequence(document.get("groups"))
    row = {
        "username": username,
        "username_key": username_key(username),
        "email": text(document.get("email"), 254),
        "registration_time": timestamp(document.get("registration_time"))
        or id_time(document)
        or 0.0,
        "pending": bool(document.get("pending", False)),
        "blocked": bool(document.get("blocked", False)),
        "is_approver": APPROVERS_GROUP in groups,
        "tests_repo": text(document.get("tests_repo"), 500),
        "machine_limit": integer(document.get("machine_limit"), DEFAULT_MACHINE_LIMIT),
        "credentials_version": 0,
    }
    password = document.get("password")
    others = tuple(str(group) for group in groups if group != APPROVERS_GROUP)
    return UserFields(row, password if isinstance(password, str) else "", others)


def convert_action(document: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(row of every column but id, whether its name is one Arbiter writes)."""
    name = document.get("action")
    if not isinstance(name, str) or not name:
        raise Skip("no action name")
    when = timestamp(document.get("time")) or id_time(document)
    if when is None:
        raise Skip("no time")
    extra = {key: plain(value) for key, value in document.items() if key not in ACTION_COLUMNS}
    task_id = document.get("task_id")
    row = {
        "time": when,
        "action": name[:32],
        "username": text(document.get("username"), 64),
        "message": document.get("message") if isinstance(document.get("message"), str) else "",
        "run_id": object_id_text(document.get("run_id")),
        "run": text(document.get("run"), 64) or None,
        "task_id": int(task_id)
        if isinstance(task_id, int) and not isinstance(task_id, bool)
        else None,
        "worker": text(document.get("worker"), 160) or None,
        "user": text(document.get("user"), 64) or None,
        "data": extra or None,
        "fishtest_id": object_id_text(document.get("_id")),
    }
    return row, name in ACTION_NAMES


@dataclass(frozen=True, slots=True)
class NetFields:
    name: str
    username: str
    uploaded_at: float
    downloads: int
    is_master: bool
    first_test: Any
    last_test: Any


def convert_net(document: dict[str, Any]) -> NetFields:
    name = document.get("name")
    if not isinstance(name, str) or not NET_NAME.fullmatch(name):
        raise Skip("name is not nn-<12 hex>.nnue")
    return NetFields(
        name=name,
        username=text(document.get("user"), 64),
        uploaded_at=id_time(document) or 0.0,
        downloads=integer(document.get("downloads")),
        is_master=bool(document.get("is_master", False)),
        first_test=plain(document.get("first_test")),
        last_test=plain(document.get("last_test")),
    )


def convert_pgn(document: dict[str, Any]) -> dict[str, Any]:
    key = document.get("run_id")
    found = PGN_KEY.fullmatch(key) if isinstance(key, str) else None
    if found is None:
        raise Skip("run_id is not <run id>-<task id>")
    data = document.get("pgn_zip")
    if not isinstance(data, bytes) or not data.startswith(GZIP_MAGIC):
        raise Skip("pgn_zip is not gzip data")
    return {
        "run_id": found[1],
        "task_id": int(found[2]),
        "size": len(data),
        "pgn_zip": data,
        "uploaded_at": id_time(document) or 0.0,
    }


def convert_worker(document: dict[str, Any]) -> tuple[str, bool, str, float]:
    """(worker_name, blocked, message, last_updated) of a worker's block."""
    name = document.get("worker_name")
    if not isinstance(name, str) or not name or len(name) > 120:
        raise Skip("no worker_name of at most 120 characters")
    when = timestamp(document.get("last_updated")) or id_time(document) or 0.0
    return name, bool(document.get("blocked", False)), text(document.get("message"), 500), when


def convert_kv(document: dict[str, Any]) -> tuple[str, Any]:
    """(Arbiter kv key, value): Fishtest's keys are kept under `fishtest/`."""
    key = document.get("_id")
    if not isinstance(key, str) or not key or len(key) > 100:
        raise Skip("_id is not a key of at most 100 characters")
    value = plain(document.get("value"))
    if value is None:
        raise Skip("no value")
    return f"fishtest/{key}", value
