"""Blocking and unblocking worker machines (reference 8, `/workers/<name>`).

A machine is named by its short worker name (`alice-8cores-a1b2c3d4`); a
blocked one is refused work by the scheduler with the message given here.
Its owner (the user the name starts with) or an approver may change it; each
change writes a `block_worker` action in the same transaction. The owner's
part of a name matches in any case, as account names do: a block is stored
under the account's own spelling and holds against every other.
Runs in the threadpool.
"""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from arbiter.domain import actions
from arbiter.domain.accounts import User
from arbiter.domain.errors import NotFound, PermissionDenied, ValidationError
from arbiter.domain.profile_fields import same_username, username_key
from arbiter.domain.quarantine import quarantined_messages
from arbiter.protocol.workers import is_short_worker_name, owner_of
from arbiter.storage import Storage, Tx
from arbiter.storage.base import NewAction
from arbiter.storage.records import WorkerBlockRecord

MAX_BLOCK_MESSAGE = 500
BLOCKS_REFRESH_SECONDS = 2.0  # how stale the scheduler's view of blocks may be


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    name: str
    owner: str
    blocked: bool
    message: str
    last_updated: float | None
    seen: bool = True  # a task was ever given to it here


def machine_key(worker_name: str) -> str:
    """The name with its owner's part case-folded: one machine however its
    account's name is spelled."""
    owner, _, rest = worker_name.partition("-")
    return f"{username_key(owner)}-{rest}"


def may_change(user: User | None, worker_name: str) -> bool:
    if user is None:
        return False
    return user.is_approver or same_username(user.username, owner_of(worker_name))


def _spelled_as_account(tx: Tx, worker_name: str) -> str:
    """The name with its owner's part as the account spells it (unchanged when no
    such account exists)."""
    owner, _, rest = worker_name.partition("-")
    account = tx.users.get_by_key(owner)
    return worker_name if account is None else f"{account.username}-{rest}"


class BlockedMachines:
    """Blocked and quarantined machines and their messages, as the scheduler sees them.

    request_task asks on every call; reading the table each time was a tenth of
    its cost. The few blocked rows are read at most every BLOCKS_REFRESH_SECONDS,
    and at once after a change made through this process (`forget`), so a block
    set on a secondary reaches the primary's scheduler within that time.
    """

    def __init__(
        self,
        storage: Storage,
        clock: Callable[[], float] = time.monotonic,
        refresh_seconds: float = BLOCKS_REFRESH_SECONDS,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._messages: dict[str, str] = {}
        self._read_at: float | None = None  # None: read on the next question

    def message(self, worker_name: str) -> str | None:
        """The block message of this machine ("" if none was given), None if not blocked."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self._refresh_seconds:
                with self._storage.read() as tx:
                    records = tx.worker_blocks.list_blocked()
                    quarantined = quarantined_messages(tx)
                self._messages = {machine_key(name): text for name, text in quarantined.items()}
                self._messages.update(
                    {machine_key(record.worker_name): record.message for record in records}
                )
                self._read_at = now
            return self._messages.get(machine_key(worker_name))

    def forget(self) -> None:
        with self._lock:
            self._read_at = None


class WorkerBlocks:
    def __init__(
        self,
        storage: Storage,
        changed: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`changed` is called after every change (`BlockedMachines.forget`)."""
        self._storage = storage
        self._changed = changed
        self._clock = clock

    def status(self, worker_name: str) -> WorkerStatus:
        """The machine's block and whether it ever played here; NotFound when no
        account owns the name and nobody blocked it (no such machine can play)."""
        _check_name(worker_name)
        with self._storage.read() as tx:
            has_owner = tx.users.get_by_key(owner_of(worker_name)) is not None
            spelled = _spelled_as_account(tx, worker_name)
            record = tx.worker_blocks.get(spelled)
            if not has_owner and record is None:
                raise NotFound(f"No account is named {owner_of(worker_name)}: no such machine.")
            seen = tx.tasks.machine_seen(sorted({worker_name, spelled}))
        return replace(_status(spelled, record), seen=seen)

    def blocked(self) -> list[WorkerStatus]:
        """Every blocked machine, most recently changed first."""
        with self._storage.read() as tx:
            records = tx.worker_blocks.list_blocked()
        found = [_status(record.worker_name, record) for record in records]
        return sorted(found, key=lambda status: -(status.last_updated or 0.0))

    def set_blocked(self, user: User, worker_name: str, *, blocked: bool, message: str) -> None:
        _check_name(worker_name)
        if not may_change(user, worker_name):
            raise PermissionDenied("Only the machine's owner or an approver may block it.")
        message = message.strip()
        if len(message) > MAX_BLOCK_MESSAGE:
            raise ValidationError("message", f"is longer than {MAX_BLOCK_MESSAGE} characters")
        now = self._clock()
        with self._storage.write() as tx:
            worker_name = _spelled_as_account(tx, worker_name)
            tx.worker_blocks.set(worker_name, blocked=blocked, message=message, at=now)
            verb = "blocked" if blocked else "unblocked"
            actions.record(
                tx,
                NewAction(
                    time=now,
                    action="block_worker",
                    username=user.username,
                    worker=worker_name,
                    # The reference's message is the verb alone; the reason is
                    # kept with the block itself.
                    message=verb,
                ),
            )
        self._changed()


def _check_name(worker_name: str) -> None:
    if not is_short_worker_name(worker_name):
        raise NotFound(f"{worker_name} is not a worker name (user-Ncores-key).")


def _status(name: str, record: WorkerBlockRecord | None) -> WorkerStatus:
    if record is None:
        return WorkerStatus(name, owner_of(name), False, "", None)
    return WorkerStatus(name, owner_of(name), record.blocked, record.message, record.last_updated)
