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
account often meet by chance (the fleet benchmark: 0.2-0.4% of request_task at 10,000
workers on 8 accounts). `enter_or_wait` lets such a call wait, on the event
loop and holding nothing, for one of its account's places, handed to it as it
is given back, so the account never holds more than its share; at most
`per_account` calls of an account wait so, and every call past the share is
answered within the patience it was given. A place is handed over only while
the gate has another free place: when it is full, calls of other accounts
are being refused, and a waiting call, whose account already holds its
share, should not take the place before them.

Nor need a call be refused the moment the gate is full: the gate is held
for milliseconds, and fills when the assignment thread is held up for a few
tens of them (a garbage collection, a WAL checkpoint, the host taking the
core; the fleet benchmark: about 0.17% of request_task at 10,000 workers x4), or
when one batch of results ends many tasks at once and their workers all
ask for the next. Each such refusal idles a worker's machine for 15 s or
more (the worker backs off). Given `room_patience`, a call at a full gate
waits that long, holding nothing, for the next place given back (at most
`room_line` calls wait so, oldest first; the rest are refused at once), and
is refused if none came: the gate still never holds more than its places,
and a saturated server still answers within that patience.

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
    """`places` shared by every account, at most `per_account` (None: no cap) each;
    up to `room_line` calls may wait for a place at a full gate."""

    def __init__(
        self, places: threading.Semaphore, per_account: int | None, room_line: int = 0
    ) -> None:
        if per_account is not None and per_account < 1:
            raise ValueError("per_account must be at least 1")
        if room_line < 0:
            raise ValueError("room_line must not be negative")
        self._places = places
        self._per_account = per_account
        self._room_line = room_line
        self._held: Counter[str] = Counter()  # only accounts holding a place: bounded
        # Calls past their account's share waiting for one of its places, oldest
        # first; only accounts with a waiting call (at most per_account each).
        self._waiting: dict[str, deque[asyncio.Future[bool]]] = {}
        # Calls at a full gate waiting for any place, oldest first, with their
        # accounts (at most room_line).
        self._waiting_for_room: deque[tuple[str, asyncio.Future[bool]]] = deque()
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

    async def enter_or_wait(
        self, account: str, patience: float, room_patience: float = 0.0
    ) -> bool:
        """Whether `account` got a place. A call past the account's share waits up
        to `patience` s for one of the account's places, handed over as one is
        given back while the gate has room for others (only `per_account` calls
        of an account wait for one; the others wait out `patience`, so a client
        re-sending each refusal at once is slowed down, and are refused). A call
        at a full gate waits up to `room_patience` s for the next place given
        back, if the line for room is not full; refused at once otherwise.
        [event loop]"""
        key = account.lower()
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._enter_locked(key):
                return True
            over_share = self._over_share_locked(key)
            if over_share:
                waiter = self._line_up_locked(key, loop)
            elif room_patience > 0.0:
                waiter = self._wait_for_room_locked(key, loop)
            else:
                waiter = None
        if over_share:
            if waiter is None:
                await asyncio.sleep(patience)
                TOO_BUSY_ACCOUNT_SHARE.inc()
                return False
            granted = await self._wait(key, waiter, patience)
            if not granted:
                TOO_BUSY_ACCOUNT_SHARE.inc()
            return granted
        granted = waiter is not None and await self._wait(key, waiter, room_patience)
        if not granted:
            TOO_BUSY_GATE_FULL.inc()
        return granted

    def leave(self, account: str) -> None:
        """Give back a place `account` got: to the account's oldest waiting call if
        it has one and the gate has another free place (when the gate is full,
        calls of other accounts are being refused: the place is theirs as much
        as the waiter's, whose account holds its share); else to the oldest call
        waiting for room whose account may hold one more; else to the gate."""
        key = account.lower()
        with self._lock:
            taker = self._next_taker_locked(key)
            if taker is None:
                self._give_back_locked(key)
                return
            taker_key, waiter = taker
            if taker_key != key:  # the place changes accounts, still counted once
                self._give_back_count_locked(key)
                self._held[taker_key] += 1
        try:
            waiter.get_loop().call_soon_threadsafe(self._hand_over, taker_key, waiter)
        except RuntimeError:  # its loop is closed: nobody will take the place
            self.leave(taker_key)

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

    def _give_back_locked(self, key: str) -> None:
        # Released under the lock: a call finding the gate full lines up for room
        # only while no place is on its way back to the gate.
        self._give_back_count_locked(key)
        self._places.release()

    def _give_back_count_locked(self, key: str) -> None:
        left = self._held.pop(key, 0) - 1
        if left > 0:
            self._held[key] = left

    def _next_taker_locked(self, key: str) -> "tuple[str, asyncio.Future[bool]] | None":
        """Who gets the place `key` gives back, taken out of its line; None: the gate."""
        queue = self._waiting.get(key)
        if queue and self._gate_has_room_locked():
            waiter = queue.popleft()
            if not queue:
                del self._waiting[key]
            return key, waiter
        for entry in self._waiting_for_room:
            taker_key = entry[0]
            if taker_key == key or not self._over_share_locked(taker_key):
                self._waiting_for_room.remove(entry)
                return entry
        return None

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

    def _wait_for_room_locked(
        self, key: str, loop: asyncio.AbstractEventLoop
    ) -> "asyncio.Future[bool] | None":
        """A new waiter at the end of the line for room; None if that line is full."""
        if len(self._waiting_for_room) >= self._room_line:
            return None
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiting_for_room.append((key, waiter))
        return waiter

    async def _wait(self, key: str, waiter: "asyncio.Future[bool]", patience: float) -> bool:
        """Whether a place reached `waiter` within `patience` s. [event loop]"""
        timer = asyncio.get_running_loop().call_later(patience, self._give_up, key, waiter)
        granted = False
        try:
            granted = await waiter
        finally:
            timer.cancel()
            if not granted:
                self._withdraw(key, waiter)
        return granted

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
        """Take `waiter` out of its line; False if it was no longer there (a place
        was handed to it)."""
        with self._lock:
            queue = self._waiting.get(key)
            if queue is not None and waiter in queue:
                queue.remove(waiter)
                if not queue:
                    del self._waiting[key]
                return True
            for entry in self._waiting_for_room:
                if entry[1] is waiter:
                    self._waiting_for_room.remove(entry)
                    return True
            return False
