"""A minimal HTTP/1.1 client over asyncio streams, cheap enough for a 10,000-worker fleet.

Only what the fleet needs: POST/GET with a body, keep-alive, replies framed by
Content-Length (every Arbiter JSON reply is). A `Pool` shares a bounded number
of keep-alive connections between many simulated workers, as a reverse proxy
does in front of the real server when workers outnumber file descriptors.
Connections idle for longer than `max_idle` are closed before use, so the
server's keep-alive timeout never races a request.
"""

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass

MAX_IDLE = 60.0  # s; the server keeps idle connections 75 s


class HttpError(Exception):
    """A transport-level failure; `kind` is the error category the fleet reports."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


@dataclass(slots=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


class Connection:
    """One keep-alive connection; requests on it are strictly sequential."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.last_used = time.monotonic()
        self.usable = True

    @classmethod
    async def open(cls, host: str, port: int) -> "Connection":
        try:
            reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        except ConnectionRefusedError as error:
            raise HttpError("refused", str(error)) from None
        except OSError as error:
            raise HttpError("connect", str(error)) from None
        return cls(reader, writer)

    def close(self) -> None:
        self.usable = False
        self.writer.transport.abort()

    def send(self, request: bytes) -> None:
        self.writer.write(request)

    async def read_response(self) -> Response:
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            raise HttpError("closed", "connection closed before a reply") from None
        except (ConnectionError, asyncio.LimitOverrunError) as error:
            raise HttpError("reset", str(error)) from None
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise HttpError("bad-reply", lines[0][:80]) from None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        try:
            body = await self.reader.readexactly(length) if length else b""
        except (asyncio.IncompleteReadError, ConnectionError):
            raise HttpError("closed", "connection closed inside a reply") from None
        if headers.get("connection", "").lower() == "close":
            self.usable = False
        self.last_used = time.monotonic()
        return Response(status, headers, body)


def encode_request(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", f"content-length: {len(body)}"]
    if body:
        lines.append("content-type: application/json")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Pool:
    """At most `size` keep-alive connections to one server, shared by any number of callers."""

    def __init__(self, host: str, port: int, size: int, max_idle: float = MAX_IDLE) -> None:
        self.host = host
        self.port = port
        self.size = size
        self.max_idle = max_idle
        self._idle: deque[Connection] = deque()
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def open_connections(self) -> int:
        return self._open

    async def acquire(self) -> Connection:
        while True:
            while self._idle:
                connection = self._idle.pop()  # most recently used first: fewer idle closes
                if time.monotonic() - connection.last_used < self.max_idle:
                    return connection
                self._discard(connection)
            if self._open < self.size:
                self._open += 1
                try:
                    return await Connection.open(self.host, self.port)
                except HttpError:
                    self._open -= 1
                    self._wake()
                    raise
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def release(self, connection: Connection) -> None:
        if connection.usable:
            self._idle.append(connection)
        else:
            self._discard(connection)
            return
        self._wake()

    def _discard(self, connection: Connection) -> None:
        connection.close()
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Response:
        """One request on a pooled connection; HttpError on any transport failure."""
        connection = await self.acquire()
        try:
            async with asyncio.timeout(timeout):
                connection.send(encode_request(method, path, body, headers))
                return await connection.read_response()
        except TimeoutError:
            connection.usable = False
            raise HttpError("timeout", f"no reply in {timeout} s") from None
        except HttpError:
            connection.usable = False
            raise
        finally:
            self.release(connection)

    async def send_and_drop(
        self, path: str, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        """An abrupt disconnect: send a request, then close before the reply."""
        connection = await self.acquire()
        connection.send(encode_request("POST", path, body, headers))
        with contextlib.suppress(ConnectionError):
            await connection.writer.drain()
        connection.usable = False
        self.release(connection)

    def close(self) -> None:
        while self._idle:
            self._discard(self._idle.pop())
