"""A reply's head and its body leave in one write.

uvicorn writes a response's head to the socket when the app sends
`http.response.start` and its body when the app sends the body: two `send`
system calls, and on TCP_NODELAY sockets two segments, for a worker's reply of
a few hundred bytes. Issue 19's profiles put the two writes at a tenth of the
server's core at 10,000 workers, the first costing twice the second.

`HeadHeldTransport` stands between one request's uvicorn cycle and the
connection's transport: it holds the first write (the head) and sends it with
the next one (the body's first chunk), or when the cycle closes the
connection. The protocol (`web/connection_limits.py`) gives one to each
request whose first write is certain to be its head and to be followed by
another write or a close:

- not a HEAD request (uvicorn writes no body for it);
- not one that expects `100 Continue` (uvicorn writes that interim reply on
  the app's first read, before the head).

Everything else a transport offers passes straight through. [LOOP]
"""

import asyncio
from typing import Any


class HeadHeldTransport:
    """One request's view of its connection's transport: the first write waits
    for the second, or for `close`."""

    __slots__ = ("head", "transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.head: bytes | None = None  # the held head; b"" once it has gone out

    def write(self, data: bytes) -> None:
        if self.head is None:
            self.head = bytes(data)
            return
        if self.head:
            data = self.head + data
            self.head = b""
        self.transport.write(data)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def flush(self) -> None:
        if self.head:
            self.transport.write(self.head)
        self.head = b""

    def __getattr__(self, name: str) -> Any:
        # is_closing, get_extra_info and the rest: the connection's own.
        return getattr(self.transport, name)


def holds_head(method: str, expects_continue: bool) -> bool:
    """Whether a request's first write is its head, followed by a body write or
    a close (see the module's docstring)."""
    return method != "HEAD" and not expects_continue
