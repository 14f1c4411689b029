"""The seeds' admission gate in front of request_task, shared fairly between accounts.

The gate is a non-blocking semaphore of TASK_SEMAPHORE_SIZE places. Without
more, one account that keeps many calls in flight holds every place, and the
rest of the fleet is told "too busy". So an account may hold at most
`per_account` places at once (by default half the gate, at least one): the
others always find the remaining places, however hard one account tries.
Accounts are counted by their canonical name (case-insensitive), so the
spelling a worker sends makes no difference.

A call refused only for its account's share need not be refused while the
gate has room: with many workers on few accounts, two or three calls of one
account often meet by chance (issue 19: 0.2-0.4% of request_task at 10,000
workers on 8 accounts). `enter_or_wait` lets such a call wait, on the event
loop and holding nothing, for one of its account's places, handed to it as it
is given back, so the account never holds more than its share; at most
`per_account` calls of an account wait so, and every call past the share is
answered within the patience it was given. A place is handed over only while
the gate has another free place: when it is full, calls of other accounts
are being refused, and a waiting call, whose account already holds its
share, should not take the place before them.

Threads: `enter` and `enter_or_wait` run on the event loop, `leave` on the
assignment thread (a place handed over reaches its waiter through the
waiter's loop); all take a lock held only for a few dictionary operations.
"""

import asyncio
import threading
from collections import Counter, deque

from arbiter.telemetry import TOO_BUSY_ACCOUNT_SHARE, TOO_BUSY_GATE_FULL


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
        # Calls past their account's share waiting for one of its places, oldest
        # first; only accounts with a waiting call (at most per_account each).
        self._waiting: dict[str, deque[asyncio.Future[bool]]] = {}
        self._lock = threading.Lock()

    def enter(self, account: str) -> bool:
        """Whether `account` got a place, without waiting (never blocks)."""
        key = account.lower()
        with self._lock:
            if self._enter_locked(key):
                return True
            over_share = self._over_share_locked(key)
        (TOO_BUSY_ACCOUNT_SHARE if over_share else TOO_BUSY_GATE_FULL).inc()
        return False

    async def enter_or_wait(self, account: str, patience: float) -> bool:
        """Whether `account` got a place. Refused at once when the gate is full; a
        call past the account's share waits up to `patience` s for one of the
        account's places, handed over as one is given back while the gate has
        room for others (only `per_account` calls of an account wait for one;
        the others wait out `patience`, so a client re-sending each refusal at
        once is slowed down, and are refused). [event loop]"""
        key = account.lower()
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._enter_locked(key):
                return True
            over_share = self._over_share_locked(key)
            waiter = self._line_up_locked(key, loop) if over_share else None
        if not over_share:
            TOO_BUSY_GATE_FULL.inc()
            return False
        if waiter is None:
            await asyncio.sleep(patience)
            TOO_BUSY_ACCOUNT_SHARE.inc()
            return False
        timer = loop.call_later(patience, self._give_up, key, waiter)
        granted = False
        try:
            granted = await waiter
        finally:
            timer.cancel()
            if not granted:
                self._withdraw(key, waiter)
        if not granted:
            TOO_BUSY_ACCOUNT_SHARE.inc()
        return granted

    def leave(self, account: str) -> None:
        """Give back a place `account` got: to the account's oldest waiting call if
        it has one and the gate has another free place, else to the gate (when
        the gate is full, calls of other accounts are being refused: the place
        is theirs as much as the waiter's, whose account holds its share)."""
        key = account.lower()
        with self._lock:
            queue = self._waiting.get(key)
            if queue and self._gate_has_room_locked():
                waiter = queue.popleft()
                if not queue:
                    del self._waiting[key]
            else:
                waiter = None
                left = self._held.pop(key, 0) - 1
                if left > 0:
                    self._held[key] = left
        if waiter is None:
            self._places.release()
            return
        try:  # the place stays the account's, counted once: now the waiter's
            waiter.get_loop().call_soon_threadsafe(self._hand_over, key, waiter)
        except RuntimeError:  # its loop is closed: nobody will take the place
            self.leave(key)

    def holds_share(self, account: str) -> bool:
        """Whether `account` holds every place it may (so its next call is refused)."""
        with self._lock:
            return self._over_share_locked(account.lower())

    def held_by(self, account: str) -> int:
        """How many places `account` holds now."""
        with self._lock:
            return self._held[account.lower()]

    def occupied(self) -> int:
        """Places held now, by every account together."""
        with self._lock:
            return sum(self._held.values())

    def _enter_locked(self, key: str) -> bool:
        if self._over_share_locked(key) or not self._places.acquire(blocking=False):
            return False
        self._held[key] += 1
        return True

    def _gate_has_room_locked(self) -> bool:
        """Whether a place besides those held is free: no call is being refused for
        a full gate, so handing a place to a waiting call keeps nobody out."""
        if not self._places.acquire(blocking=False):
            return False
        self._places.release()
        return True

    def _over_share_locked(self, key: str) -> bool:
        return self._per_account is not None and self._held[key] >= self._per_account

    def _line_up_locked(
        self, key: str, loop: asyncio.AbstractEventLoop
    ) -> "asyncio.Future[bool] | None":
        """A new waiter at the end of the account's line; None if the line is full."""
        queue = self._waiting.get(key)
        if queue is None:
            queue = self._waiting[key] = deque()
        elif len(queue) >= (self._per_account or 1):
            return None
        waiter: asyncio.Future[bool] = loop.create_future()
        queue.append(waiter)
        return waiter

    def _hand_over(self, key: str, waiter: "asyncio.Future[bool]") -> None:
        """On the waiter's loop: the place is its, unless it gave up meanwhile
        (cancelled), and then the place goes on."""
        if waiter.done():
            self.leave(key)
        else:
            waiter.set_result(True)

    def _give_up(self, key: str, waiter: "asyncio.Future[bool]") -> None:
        """On the waiter's loop, its patience over: refused, unless a place is
        already on its way to it."""
        if self._unqueue(key, waiter) and not waiter.done():
            waiter.set_result(False)

    def _withdraw(self, key: str, waiter: "asyncio.Future[bool]") -> None:
        """A waiter that will not use a place (refused or cancelled): out of the
        line, or a place handed to it given back."""
        if self._unqueue(key, waiter):
            return
        if waiter.done() and not waiter.cancelled() and waiter.result():
            self.leave(key)  # handed over, then cancelled before it could resume
        # Otherwise the hand-over is on its way: it finds the waiter cancelled
        # and passes the place on.

    def _unqueue(self, key: str, waiter: "asyncio.Future[bool]") -> bool:
        """Take `waiter` out of its account's line; False if it was no longer there
        (a place was handed to it)."""
        with self._lock:
            queue = self._waiting.get(key)
            if queue is None or waiter not in queue:
                return False
            queue.remove(waiter)
            if not queue:
                del self._waiting[key]
            return True
