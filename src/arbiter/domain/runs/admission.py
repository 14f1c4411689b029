"""The seeds' admission gate in front of request_task, shared fairly between accounts.

The gate is a non-blocking semaphore of TASK_SEMAPHORE_SIZE places. Without
more, one account that keeps many calls in flight holds every place, and the
rest of the fleet is told "too busy". So an account may hold at most
`per_account` places at once (by default half the gate, at least one): the
others always find the remaining places, however hard one account tries.
Accounts are counted by their canonical name (case-insensitive), so the
spelling a worker sends makes no difference.

Threads: `enter` runs on the event loop, `leave` on the assignment thread;
both take a lock held only for a few dictionary operations.
"""

import threading
from collections import Counter


def fair_share(places: int) -> int:
    """The default cap per account: half the gate, at least one place."""
    return max(1, places // 2)


class AdmissionGate:
    """`places` shared by every account, at most `per_account` (None: no cap) each."""

    def __init__(self, places: threading.Semaphore, per_account: int | None) -> None:
        if per_account is not None and per_account < 1:
            raise ValueError("per_account must be at least 1")
        self._places = places
        self._per_account = per_account
        self._held: Counter[str] = Counter()  # only accounts holding a place: bounded
        self._lock = threading.Lock()

    def enter(self, account: str) -> bool:
        """Whether `account` got a place, without waiting (never blocks)."""
        key = account.lower()
        with self._lock:
            if self._per_account is not None and self._held[key] >= self._per_account:
                return False
            if not self._places.acquire(blocking=False):
                return False
            self._held[key] += 1
        return True

    def leave(self, account: str) -> None:
        """Give back a place `account` got from `enter`."""
        key = account.lower()
        with self._lock:
            left = self._held.pop(key, 0) - 1
            if left > 0:
                self._held[key] = left
        self._places.release()

    def holds_share(self, account: str) -> bool:
        """Whether `account` holds every place it may (so its next call is refused)."""
        with self._lock:
            return (
                self._per_account is not None and self._held[account.lower()] >= self._per_account
            )

    def held_by(self, account: str) -> int:
        """How many places `account` holds now."""
        with self._lock:
            return self._held[account.lower()]

    def occupied(self) -> int:
        """Places held now, by every account together."""
        with self._lock:
            return sum(self._held.values())
