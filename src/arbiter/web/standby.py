"""What a standby serves while it waits for the primary's lease (`arbiter
serve --role standby`, commands/serve.py): its health, and nothing else.

`/healthz` answers 200 (the process is up); `/readyz` 503, so a balancer that
routes by readiness sends nothing here; every other request a 503 that says
to retry shortly (JSON on /api/*, which workers back off on and retry, as they
do on a secondary). It touches no database: the lease is polled by the serve
command, which stops this app and starts the primary's once it holds it.
"""

import json
import time
from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from arbiter.storage import Storage, StorageError
from arbiter.storage.lease_fence import MARKER_KEY
from arbiter.web.middleware import send_body, send_error

WAITING = "standby: this process serves once the primary is gone, retry shortly"
NO_STORE = [(b"cache-control", b"no-store")]


async def standby_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/healthz":
        await _json(send, 200, {"status": "alive", "role": "standby"})
    elif path == "/readyz":
        await _json(send, 503, {"status": "not ready", "role": "standby", "lease": False})
    else:
        await send_error(scope, send, 503, WAITING)


async def _json(send: Send, status: int, body: dict[str, object]) -> None:
    await send_body(send, status, b"application/json", json.dumps(body).encode(), NO_STORE)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class HolderWatch:
    """Whether the primary holding the lease still beats: the beat in its mark
    (web/lease.py writes a new one every ARBITER_LEASE_CHECK_SECONDS) must change
    within `expiry` seconds of this process's own clock, so the two machines'
    clocks are never compared. A frozen primary (SIGSTOP, a paused VM) keeps
    its database sessions, and so its lease, but stops beating."""

    def __init__(self, expiry: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.expiry = expiry
        self._clock = clock
        self._seen: object = None
        self._since = clock()

    def expired(self, mark: object) -> bool:
        """Told the mark read now (None when it could not be read). A mark
        without a beat (a primary of a version that does not beat, during a
        rolling upgrade) never expires."""
        now = self._clock()
        beats = isinstance(mark, dict) and "beat" in mark
        if not beats or mark != self._seen:
            self._seen, self._since = mark, now
            return False
        return now - self._since >= self.expiry

    def reset(self) -> None:
        self._seen, self._since = None, self._clock()


def read_mark(storage: Storage) -> object:
    """The primary's mark (token and beat), or None when it cannot be read."""
    try:
        with storage.read() as tx:
            mark: object = tx.kv.get(MARKER_KEY)
    except StorageError:
        return None
    return mark
