"""Throttles against password guessing and signup floods, in memory on this process.

`FailureThrottle` lets a key (an account name, a client address) fail a few
times for free, then makes it wait a delay that doubles with every further
failure, up to a ceiling; a success clears the key, and a key that has not
failed for a while is forgotten. `RateWindow` allows a key a number of events
per sliding window (signups per address).

Both live in this process only: a secondary and the primary throttle on their
own, and a restart forgets everything. Both are bounded: past `capacity` keys
the least recently used one is dropped, so a flood of distinct keys costs a
fixed amount of memory. Every method takes one lock held for a few dict
operations, never for I/O: safe from any thread and from the event loop.
"""

import ipaddress
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

# Longer keys are cut: a login form accepts any name, and a key's size must not be
# the attacker's choice. Real usernames are at most 32 characters.
MAX_KEY_LENGTH = 64
FIRST_DELAY = 1.0  # seconds, after the first failure beyond the free ones


def account_key(username: str, address: str = "") -> str:
    """An account as the throttle counts guesses at it from one client: the
    case-folded name, as accounts are, and the client's `address_key` (none
    when the address is unknown). Guesses from one address never make the
    account wait for another: guessing slows guessing, never the owner."""
    key = "account:" + username.casefold()[:MAX_KEY_LENGTH]
    return f"{key} from {address_key(address)}" if address else key


def address_key(address: str) -> str:
    """A client as the throttle counts it (`client_of`); anything unparseable
    is kept as given (cut)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return "address:" + address[:MAX_KEY_LENGTH]
    return "address:" + client_of(parsed)


IPV6_CLIENT_PREFIX = 64  # one subscriber's network: what one IPv6 client can hold


def client_of(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """The client an address stands for, as everything counted per client
    counts it: an IPv4 address itself, an IPv4-mapped one as its IPv4 address
    (::ffff:192.0.2.7 is 192.0.2.7), any other IPv6 address as its /64, since
    an IPv6 client usually holds the whole network."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_CLIENT_PREFIX), strict=False))
    return str(address)


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    free_failures: int  # failures before any delay
    max_delay: float  # seconds; delays double up to this
    forget_after: float  # seconds without a failure after which a key starts over


@dataclass(slots=True)
class _Failures:
    count: int
    last: float
    blocked_until: float


class FailureThrottle:
    def __init__(
        self, policy: FailurePolicy, clock: Callable[[], float], capacity: int = 100_000
    ) -> None:
        self._policy = policy
        self._clock = clock
        self._capacity = capacity
        # Oldest failure first: forgetting and evicting both take from the front.
        self._entries: OrderedDict[str, _Failures] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, key: str) -> float:
        """Seconds this key must still wait before its next attempt (0: go ahead)."""
        now = self._clock()
        with self._lock:
            self._forget_old(now)
            entry = self._entries.get(key)
            return 0.0 if entry is None else max(0.0, entry.blocked_until - now)

    def failed(self, key: str) -> tuple[int, float]:
        """Count a failure; returns the key's failures so far and the delay this one
        imposes (0 while failures are free)."""
        now = self._clock()
        with self._lock:
            self._forget_old(now)
            entry = self._entries.pop(key, None)
            count = 1 if entry is None else entry.count + 1
            delay = self._delay(count)
            self._entries[key] = _Failures(count, now, now + delay)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
            return count, delay

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _delay(self, count: int) -> float:
        beyond = count - self._policy.free_failures
        if beyond <= 0:
            return 0.0
        # 2**beyond overflows a float long before anyone fails that often: cap first.
        doublings = min(beyond - 1, 64)
        return min(self._policy.max_delay, FIRST_DELAY * 2.0**doublings)

    def _forget_old(self, now: float) -> None:
        horizon = now - self._policy.forget_after
        while self._entries:
            key, oldest = next(iter(self._entries.items()))
            if oldest.last > horizon or oldest.blocked_until > now:
                return
            del self._entries[key]


class RateWindow:
    """At most `limit` events per key in any `window` seconds."""

    def __init__(
        self, limit: int, window: float, clock: Callable[[], float], capacity: int = 100_000
    ) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._capacity = capacity
        self._events: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Count an event if the key has room for it and return 0; otherwise count
        nothing and return the seconds until it has room."""
        now = self._clock()
        with self._lock:
            events = self._events.pop(key, None) or deque()
            while events and events[0] <= now - self._window:
                events.popleft()
            wait = events[0] + self._window - now if len(events) >= self._limit else 0.0
            if not wait:
                events.append(now)
            if events:
                self._events[key] = events
            while len(self._events) > self._capacity:
                self._events.popitem(last=False)
            return wait
