"""What stands between a password guess and argon2: growing delays per account
guessed from one client address and per address, a bound on signups per
address, and a gate that lets only a few argon2 calls run at once. An account
never waits because of guesses made from another address, so nobody can lock
its owner (or its workers) out by guessing.

argon2 is slow and memory-hungry on purpose (tens of milliseconds, ~20 MiB per
call). Unbounded, a flood of guesses takes every threadpool thread and every
core: the gate admits `concurrency` calls, lets `waiting` more wait up to
`wait_seconds` for their turn, and turns everyone else away at once
(`PasswordChecksBusy`), so pages and the worker API keep their threads.

State is per process and in memory (`domain.throttle`). Runs in the threadpool.
"""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from arbiter.domain.errors import PasswordChecksBusy, TooManyAttempts
from arbiter.domain.throttle import (
    FailurePolicy,
    FailureThrottle,
    RateWindow,
    account_key,
    address_key,
)

SIGNUP_WINDOW = 3600.0  # seconds: signups are counted per address per hour


@dataclass(frozen=True, slots=True)
class PasswordLimits:
    """The defaults are those of `runtime.settings.Settings` (documented in operations.md)."""

    account_free_failures: int = 5
    address_free_failures: int = 20
    max_delay_seconds: float = 900.0
    forget_seconds: float = 3600.0
    argon2_concurrency: int = 2
    argon2_waiting: int = 8
    argon2_wait_seconds: float = 0.5
    signups_per_address_per_hour: int = 5
    throttle_entries: int = 100_000


@dataclass(frozen=True, slots=True)
class Throttled:
    """A key whose failure just began or lengthened a wait (for the audit log)."""

    scope: Literal["account", "address"]
    key: str  # the account name or the client address, as given
    failures: int
    delay: float  # seconds


class HashingGate:
    def __init__(self, concurrency: int, waiting: int, wait_seconds: float) -> None:
        self._running = threading.BoundedSemaphore(concurrency)
        self._places = concurrency + waiting
        self._admitted = 0  # callers running or waiting, under _lock
        self._lock = threading.Lock()
        self._wait_seconds = wait_seconds

    def full(self) -> bool:
        """Whether a caller now would be turned away at once (a hint: places come
        and go). Never blocks."""
        with self._lock:
            return self._admitted >= self._places

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the argon2 slots; PasswordChecksBusy when none comes free in
        time, or when too many callers wait already (then without waiting at all)."""
        with self._lock:
            if self._admitted >= self._places:
                raise PasswordChecksBusy
            self._admitted += 1
        try:
            if not self._running.acquire(timeout=self._wait_seconds):
                raise PasswordChecksBusy
            try:
                yield
            finally:
                self._running.release()
        finally:
            with self._lock:
                self._admitted -= 1


class PasswordGuard:
    def __init__(
        self, limits: PasswordLimits | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        limits = limits or PasswordLimits()
        self.gate = HashingGate(
            limits.argon2_concurrency, limits.argon2_waiting, limits.argon2_wait_seconds
        )

        def throttle(free_failures: int) -> FailureThrottle:
            policy = FailurePolicy(free_failures, limits.max_delay_seconds, limits.forget_seconds)
            return FailureThrottle(policy, clock, limits.throttle_entries)

        self._accounts = throttle(limits.account_free_failures)
        self._addresses = throttle(limits.address_free_failures)
        self._signups = RateWindow(
            limits.signups_per_address_per_hour, SIGNUP_WINDOW, clock, limits.throttle_entries
        )

    def check(self, username: str, address: str) -> None:
        """TooManyAttempts while the account (guessed from this address) or the
        address must still wait."""
        wait = max(
            self._accounts.retry_after(account_key(username, address)),
            self._addresses.retry_after(address_key(address)) if address else 0.0,
        )
        if wait > 0:
            raise TooManyAttempts(wait)

    def refuse_early(self, username: str, address: str) -> None:
        """What a guess would be refused with before argon2, raised before anything
        else is done for it: TooManyAttempts while the account or the address
        must wait, PasswordChecksBusy while the argon2 gate is full. Memory only,
        never blocks: the web layer asks it on the event loop, so a flood of
        refused guesses costs no thread and no database read."""
        self.check(username, address)
        if self.gate.full():
            raise PasswordChecksBusy

    def failed(self, username: str, address: str) -> list[Throttled]:
        """Count a wrong password against the account and the address; returns the
        keys this failure made wait."""
        throttled = []
        failures, delay = self._accounts.failed(account_key(username, address))
        if delay > 0:
            throttled.append(Throttled("account", username, failures, delay))
        if address:
            failures, delay = self._addresses.failed(address_key(address))
            if delay > 0:
                throttled.append(Throttled("address", address, failures, delay))
        return throttled

    def succeeded(self, username: str, address: str) -> None:
        """The account starts over from this address. The address does not: one
        account of one's own must not buy more guesses at everybody else's."""
        self._accounts.succeeded(account_key(username, address))

    def take_signup(self, address: str) -> None:
        """Count a signup from this address, or TooManyAttempts when it has had its share."""
        wait = self._signups.take(address_key(address))
        if wait > 0:
            raise TooManyAttempts(wait, "Too many signups from your address.")
