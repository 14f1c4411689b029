"""Limits on every connection uvicorn accepts, enforced in its httptools protocol.

uvicorn's httptools protocol has no header limit (httptools buffers a header
that never ends, copying it on every read) and no timer between a request's
first byte and its last: a client that trickles is never closed. The app
cannot help, since it is called only once the headers are complete. So
`LimitedHttpToolsProtocol` subclasses uvicorn's protocol and adds:

- header bytes (request target + header names and values) and header count:
  431 beyond them;
- time from a request's first byte to the end of its headers, and for its
  body: closed beyond them (a body still arriving at the minimum rate gets
  another period, so large uploads on slow links finish);
- a cap on open connections: at the cap the connection idle the longest is
  closed to make room (an idle keep-alive connection may be closed at any
  time, and a client reconnects), and only when none is idle is one more
  answered with a JSON 503 and Retry-After written on its transport, without
  the app;
- a share of the cap per client address (an IPv6 client's /64 counting as one
  address; proxies named in FORWARDED_ALLOW_IPS are not counted, since they
  carry many clients and limit each themselves): one address holding
  connections cannot take the others' room;
- a request whose client goes away is abandoned: its database work stops
  (storage/request_bounds.py);
- the keep-alive timeout kept by one sweep a second over the idle
  connections (`IdleConnections`) instead of uvicorn's timer armed after every
  response; a connection that never sends a byte is closed by it too.

Per request it costs a few attribute updates and two dict operations; a timer
is armed only when a read ends in the middle of a request's head or body,
which a worker's request (one small write) almost never does.

[LOOP] Everything here runs on the event loop, inside uvicorn's protocol
callbacks; nothing blocks.
"""

import asyncio
import ipaddress
import logging
import resource
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from arbiter.domain.throttle import client_of
from arbiter.storage.request_bounds import RequestQueries
from arbiter.web.middleware import QUERIES_KEY
from arbiter.web.replies import is_temporary_worker_refusal, temporary_refusal_body

log = logging.getLogger(__name__)

# File descriptors kept for what is not a client: database, files, logs.
FD_RESERVE = 512
RETRY_AFTER_SECONDS = 10
# How long a refused connection stays open after its reply (and a half-close):
# closing at once with unread bytes makes the kernel answer with a reset, which
# can destroy the reply before the client reads it. Nothing more is read from
# it meanwhile, so a client that goes on sending costs no CPU.
LINGER_SECONDS = 2.0
CAP_WARNING_EVERY = 60.0  # s between two "connection cap reached" warnings
SHOWN_PATH_CHARS = 200

MAX_SWEEP_INTERVAL = 1.0  # s; an idle connection is closed at most this late
# The automatic share of one address: a campus of workers behind one NAT
# holds far fewer connections than this (a worker holds one while it asks).
MIN_AUTOMATIC_SHARE = 100

# Where a connection is in its current request.
IDLE, HEAD, BODY = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    header_timeout: float = 20.0
    body_timeout: float = 30.0
    body_min_rate: int = 16 * 1024  # bytes/s a body must keep up to get another period
    max_connections: int = 0  # 0: the file-descriptor limit less FD_RESERVE
    # One client address's share of the cap; 0: a twentieth of it, at least 100.
    max_connections_per_address: int = 0

    def effective_max_connections(self) -> int:
        """The cap, never above what the file-descriptor limit allows."""
        available = max(1, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - FD_RESERVE)
        return min(self.max_connections, available) if self.max_connections else available

    def effective_per_address(self) -> int:
        cap = self.effective_max_connections()
        share = self.max_connections_per_address or max(MIN_AUTOMATIC_SHARE, cap // 20)
        return min(share, cap)


def raise_fd_limit() -> None:
    """Lift the soft file-descriptor limit to the hard one: the connection cap, not
    a distribution's default of 1,024, should be what turns clients away."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def protocol_class(limits: ConnectionLimits) -> type["LimitedHttpToolsProtocol"]:
    """The protocol class for uvicorn.Config(http=...), bound to these limits."""

    class BoundLimitedHttpToolsProtocol(LimitedHttpToolsProtocol):
        pass

    BoundLimitedHttpToolsProtocol.limits = limits
    BoundLimitedHttpToolsProtocol.max_connections = limits.effective_max_connections()
    BoundLimitedHttpToolsProtocol.max_per_address = limits.effective_per_address()
    return BoundLimitedHttpToolsProtocol


_encode = msgspec.json.Encoder().encode


def reply_bytes(
    status: int, reason: str, path: str, message: str, *, duration: float, retry_after: int = 0
) -> bytes:
    """A whole JSON error reply that closes the connection: `{"error", "duration"}`,
    or a worker call's temporary refusal (web/replies.py)."""
    if is_temporary_worker_refusal(path, status):
        body = temporary_refusal_body(path, message)
    else:
        body = _encode({"error": f"{path}: {message}", "duration": round(duration, 6)})
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "x-content-type-options: nosniff",
        "connection: close",
    ]
    if retry_after:
        head.append(f"retry-after: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def shown_path(target: bytes) -> str:
    """The path of a request target as an error names it (never trusted, only shown)."""
    path = target.split(b"?", 1)[0][:SHOWN_PATH_CHARS].decode("latin-1")
    return path if path.startswith("/") else "/"


class IdleConnections:
    """One server's connections that wait for a request, in the order they began
    to wait, and the sweep that closes those idle past the keep-alive timeout.

    uvicorn arms a timer after every response and cancels it at the next
    request: at a fleet's rate that is a timer handle, a libuv timer, a bound
    method and a context made and dropped per request, with one set alive per
    idle connection, which every young collection of the garbage collector
    walks (measured on the fleet). Here going idle costs a dict insert and a request a dict
    pop. The sweep runs while any connection waits and stops at the first one
    not yet due, since the dict keeps them in the order they went idle.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.timeout = timeout
        self.interval = min(MAX_SWEEP_INTERVAL, timeout / 4)
        self.since: dict[LimitedHttpToolsProtocol, float] = {}
        self.sweep_timer: asyncio.TimerHandle | None = None

    def add(self, connection: "LimitedHttpToolsProtocol") -> None:
        """The connection waits for a request from now on."""
        self.since.pop(connection, None)  # (re)inserted last, so the dict stays in time order
        self.since[connection] = self.loop.time()
        if self.sweep_timer is None:
            self.sweep_timer = self.loop.call_later(self.interval, self.sweep)

    def discard(self, connection: "LimitedHttpToolsProtocol") -> None:
        self.since.pop(connection, None)

    def close_longest_idle(self) -> bool:
        """Close the connection that has waited longest for a request, to make
        room for a new one; False when none waits."""
        if not self.since:
            return False
        connection = next(iter(self.since))
        del self.since[connection]
        connection.timeout_keep_alive_handler()
        return True

    def sweep(self) -> None:
        due = self.loop.time() - self.timeout
        expired = []
        for connection, since in self.since.items():
            if since > due:
                break
            expired.append(connection)
        for connection in expired:
            del self.since[connection]
            connection.timeout_keep_alive_handler()  # uvicorn's: close unless closing
        self.sweep_timer = self.loop.call_later(self.interval, self.sweep) if self.since else None


_idle_by_server: "weakref.WeakKeyDictionary[ServerState, IdleConnections]" = (
    weakref.WeakKeyDictionary()
)


def idle_connections(
    server_state: ServerState, loop: asyncio.AbstractEventLoop, timeout: float
) -> IdleConnections:
    """The idle connections of the server whose state this is (one per server)."""
    idle = _idle_by_server.get(server_state)
    if idle is None:
        idle = _idle_by_server[server_state] = IdleConnections(loop, timeout)
    return idle


class AddressShares:
    """How many connections each client address holds on one server, so that
    none takes more than its share of the cap. Addresses are counted as keys:
    an IPv4 address, an IPv6 client's /64 (an IPv4-mapped one as its IPv4
    address); a trusted proxy (uvicorn's FORWARDED_ALLOW_IPS, "*" aside) or a
    Unix socket has no key and is not counted."""

    def __init__(self, trusted: list[str] | str) -> None:
        self.proxies, self.proxy_names = _proxies(trusted)
        self.held: dict[str, int] = {}

    def key(self, peer: Any) -> str | None:
        if not isinstance(peer, tuple) or not peer:
            return None
        host = str(peer[0])
        try:
            address = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return None if host in self.proxy_names else host
        if any(address in network for network in self.proxies):
            return None
        return client_of(address)

    def count(self, key: str) -> int:
        return self.held.get(key, 0)

    def add(self, key: str) -> None:
        self.held[key] = self.held.get(key, 0) + 1

    def remove(self, key: str) -> None:
        left = self.held.get(key, 0) - 1
        if left > 0:
            self.held[key] = left
        else:
            self.held.pop(key, None)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _proxies(trusted: list[str] | str) -> tuple[list[Network], set[str]]:
    """uvicorn's FORWARDED_ALLOW_IPS as networks (an address is a network of
    one) and other names. "*" trusts every peer's headers, which says nothing
    of who is a proxy: then none is."""
    entries = trusted.split(",") if isinstance(trusted, str) else trusted
    networks: list[Network] = []
    names: set[str] = set()
    for entry in (entry.strip() for entry in entries):
        if entry in ("", "*"):
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry)
    return networks, names


_shares_by_server: "weakref.WeakKeyDictionary[ServerState, AddressShares]" = (
    weakref.WeakKeyDictionary()
)


def address_shares(server_state: ServerState, trusted: list[str] | str) -> AddressShares:
    """The address shares of the server whose state this is (one per server)."""
    shares = _shares_by_server.get(server_state)
    if shares is None:
        shares = _shares_by_server[server_state] = AddressShares(trusted)
    return shares


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits above (one instance a connection)."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    max_connections: ClassVar[int] = 1 << 30
    max_per_address: ClassVar[int] = 1 << 30
    last_cap_warning: ClassVar[float] = float("-inf")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Every attribute is set here, in one order, so all instances keep
        # sharing their dict's keys (attributes first set later, in varying
        # orders, can give each instance a dict of its own).
        self.phase = IDLE
        self.head_bytes = 0  # bytes read since the current request began, in its head
        self.period_body_bytes = 0  # body bytes read in the current body period
        self.phase_timer: asyncio.TimerHandle | None = None
        self.phase_started = 0.0
        self.answered = False  # a reply was written here; nothing more is read or served
        self.turned_away = False  # over the cap: never served, never counted
        self.refusal = ""  # why it was turned away
        self.idle = idle_connections(self.server_state, self.loop, self.timeout_keep_alive)
        self.shares = address_shares(self.server_state, self.config.forwarded_allow_ips)
        self.share_key: str | None = None  # the address it counts against, once admitted

    # ------------------------------------------------------------ connections

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        key = self.shares.key(transport.get_extra_info("peername"))
        if key is not None and self.shares.count(key) >= self.max_per_address:
            self.turn_away(transport, "too many connections from your address, retry later")
            return
        if len(self.connections) >= self.max_connections and not self.idle.close_longest_idle():
            self.turn_away(transport, "too many connections, retry later")
            self.warn_at_cap()
            return
        super().connection_made(transport)
        if key is not None:
            self.shares.add(key)
            self.share_key = key
        self.idle.add(self)  # closed by the sweep if no request ever comes

    def turn_away(self, transport: asyncio.Transport, refusal: str) -> None:
        """Answer the request's first bytes with a 503 (its path is in them), or
        close after LINGER_SECONDS if none come."""
        self.transport = transport
        self.turned_away = True
        self.refusal = refusal
        self.phase_started = self.loop.time()
        self.phase_timer = self.loop.call_later(LINGER_SECONDS, transport.close)

    def warn_at_cap(self) -> None:
        now = self.loop.time()
        if now - type(self).last_cap_warning >= CAP_WARNING_EVERY:
            type(self).last_cap_warning = now
            log.warning(
                "%d connections open, the cap (ARBITER_MAX_CONNECTIONS), none of them idle:"
                " new ones get 503",
                len(self.connections),
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self.abandon_request()
        self.cancel_phase_timer()
        self.idle.discard(self)
        if self.share_key is not None:
            self.shares.remove(self.share_key)
            self.share_key = None
        super().connection_lost(exc)

    def abandon_request(self) -> None:
        """The client is gone: the request being served stops its database
        work (storage/request_bounds.py); nobody would read its answer."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return
        queries = cycle.scope.get(QUERIES_KEY)
        if isinstance(queries, RequestQueries):
            queries.abandon()

    def data_received(self, data: bytes) -> None:
        self.idle.discard(self)
        if self.answered:
            return
        if self.turned_away:
            parts = data.split(b" ", 2)
            path = shown_path(parts[1]) if len(parts) > 1 else "/"
            self.answer(503, "Service Unavailable", path, self.refusal, RETRY_AFTER_SECONDS)
            return
        if self.phase == BODY:
            self.period_body_bytes += len(data)
        else:
            self.head_bytes += len(data)
        super().data_received(data)
        if self.answered or self.phase == IDLE:
            return
        if self.phase == HEAD:
            self.check_partial_head()
        elif self.phase_timer is None:
            self.start_phase_timer(self.limits.body_timeout, self.body_period_over)

    # ------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        self.phase = HEAD
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        if self.answered:
            return
        if len(self.headers) > self.limits.max_headers or (
            # head_bytes may count body bytes read with the head: check exactly
            # only when it is over the limit.
            self.head_bytes > self.limits.max_header_bytes
            and self.exact_head_bytes() > self.limits.max_header_bytes
        ):
            self.refuse_head()
            return
        self.head_bytes = 0
        self.phase = BODY
        self.cancel_phase_timer()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self.answered:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self.answered:
            return
        self.phase = IDLE
        self.cancel_phase_timer()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        """uvicorn's, with the connection left to the idle sweep where uvicorn
        arms a keep-alive timer."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:  # the next request was read while this one was served
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        if self.phase != IDLE:
            return  # the next request's head or body has begun: its own timer runs
        self.idle.add(self)
        if self.cycle is not None and self.cycle.response_complete:
            # Request read and answered, and nothing of a later one read yet:
            # nothing reads its cycle, scope or headers again (the next request
            # makes new ones). Let them go now rather than at the connection's
            # next request: kept, each of 10,000 idle connections held a
            # finished request's two dozen objects, which every young
            # collection of the garbage collector walked (measured on the fleet).
            self.cycle = None  # type: ignore[assignment]
            self.scope = {}  # type: ignore[typeddict-item]
            self.headers = []

    # ------------------------------------------------------------ limits

    def exact_head_bytes(self) -> int:
        return len(self.url) + sum(len(name) + len(value) for name, value in self.headers)

    def check_partial_head(self) -> None:
        """A read ended inside a request's head: refuse it if it is already too
        large, else time it from its first byte."""
        if (
            self.head_bytes > self.limits.max_header_bytes
            or len(self.headers) > self.limits.max_headers
        ):
            self.refuse_head()
        elif self.phase_timer is None:
            self.start_phase_timer(self.limits.header_timeout, self.head_too_slow)

    def refuse_head(self) -> None:
        limit = f"{self.limits.max_header_bytes} bytes in at most {self.limits.max_headers}"
        message = f"request headers too large (the limit is {limit})"
        self.answer(431, "Request Header Fields Too Large", shown_path(self.url), message)

    def head_too_slow(self) -> None:
        self.phase_timer = None
        log.debug("closed %s: request headers not complete in time", self.client)
        self.transport.close()

    def body_period_over(self) -> None:
        """A body gets another period only while it arrives at the minimum rate,
        or while the app, not the client, holds it back (uvicorn stops reading
        when the app has not taken what was read)."""
        self.phase_timer = None
        enough = self.limits.body_min_rate * self.limits.body_timeout
        if self.period_body_bytes >= enough or self.flow.read_paused:
            self.start_phase_timer(self.limits.body_timeout, self.body_period_over)
            return
        log.debug("closed %s: request body not delivered in time", self.client)
        self.transport.close()

    def answer(
        self, status: int, reason: str, path: str, message: str, retry_after: int = 0
    ) -> None:
        """Reply without the app, half-close, stop reading, and close after
        LINGER_SECONDS."""
        self.answered = True
        duration = self.loop.time() - self.phase_started if self.phase_started else 0.0
        self.cancel_phase_timer()
        self.transport.write(
            reply_bytes(status, reason, path, message, duration=duration, retry_after=retry_after)
        )
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.transport.pause_reading()
        # The parser may hold the part of a header it has read (up to a read
        # past the limit); nothing is parsed any more, so let it go now. A
        # parser running this callback keeps itself alive until it returns.
        self.parser = None  # type: ignore[assignment]
        self.phase_timer = self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def start_phase_timer(self, seconds: float, callback: Callable[[], None]) -> None:
        self.phase_started = self.loop.time()
        self.period_body_bytes = 0
        self.phase_timer = self.loop.call_later(seconds, callback)

    def cancel_phase_timer(self) -> None:
        if self.phase_timer is not None:
            self.phase_timer.cancel()
            self.phase_timer = None
            self.phase_started = 0.0
