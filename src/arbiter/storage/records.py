"""Rows as plain frozen values: what the stores hand to the domain.

They mirror the tables in `schema.py` one to one, so a row maps onto a record
by column name and the domain never sees a SQLAlchemy object.
"""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: int
    username: str
    username_key: str
    email: str
    password_hash: str
    registration_time: float
    pending: bool
    blocked: bool
    is_approver: bool
    tests_repo: str
    machine_limit: int
    credentials_version: int


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id_hash: str
    user_id: int
    created_at: float
    last_seen: float
    expires_at: float
    remember: bool
    csrf_token: str


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: int
    user_id: int
    label: str
    token_hash: str
    created_at: float
    last_used: float | None
    revoked_at: float | None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    id: int
    time: float
    action: str
    username: str
    run_id: str | None
    run: str | None
    task_id: int | None
    worker: str | None
    user: str | None
    message: str
    data: Any


@dataclass(frozen=True, slots=True)
class WorkerBlockRecord:
    worker_name: str
    blocked: bool
    message: str
    last_updated: float
