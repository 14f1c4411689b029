"""A TCP forwarder in front of a primary and its standby, for the fault
benchmarks: each new connection goes to the backend whose `/readyz` last
answered 200, checked every `period` seconds, as a balancer with active
health checks does (docs/deploy.md). It stays with that backend while it is
ready, and when it stops being ready, the connections to it are cut (as
HAProxy's `on-marked-down shutdown-sessions`), so the fleet's next requests
go to whichever is ready then.

It runs on the fleet's event loop (the load generator's core).
"""

import asyncio
import contextlib

READYZ = b"GET /readyz HTTP/1.1\r\nhost: proxy\r\nconnection: close\r\n\r\n"


class ReadyProxy:
    def __init__(self, backends: list[tuple[str, int]], period: float = 0.2) -> None:
        self.backends = backends
        self.period = period
        self.current: tuple[str, int] | None = None
        self.switches: list[tuple[float, tuple[str, int] | None]] = []  # (loop time, backend)
        self._server: asyncio.Server | None = None
        self._checking: asyncio.Task[None] | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._links: dict[tuple[str, int], set[asyncio.StreamWriter]] = {}

    async def start(self) -> int:
        """Listen on a free loopback port; the port."""
        await self._check_once()
        self._checking = asyncio.create_task(self._check())
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        """Stop listening and checking, cut every connection, and let each
        connection's handler end by itself."""
        if self._checking is not None:
            self._checking.cancel()
        if self._server is not None:
            self._server.close()
        for links in self._links.values():
            for writer in links:
                writer.transport.abort()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.sleep(0.1)

    async def _check(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            await self._check_once()

    async def _check_once(self) -> None:
        if self.current is not None and await _ready(self.current):
            return
        ready = None
        for backend in self.backends:
            if backend != self.current and await _ready(backend):
                ready = backend
                break
        if self.current is not None:
            for writer in self._links.pop(self.current, set()):
                writer.transport.abort()  # marked down: its sessions are shut
        self.current = ready
        self.switches.append((asyncio.get_running_loop().time(), ready))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = self.current
        if target is None:
            writer.transport.abort()  # nothing ready: the client sees a reset and retries
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.transport.abort()
            return
        links = self._links.setdefault(target, set())
        links.add(writer)
        one = asyncio.create_task(_pipe(reader, upstream_writer))
        other = asyncio.create_task(_pipe(upstream_reader, writer))
        for pipe in (one, other):
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)
        try:
            await asyncio.wait({one, other}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in (one, other):
                pipe.cancel()
            links.discard(writer)
            writer.transport.abort()
            upstream_writer.transport.abort()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()


async def _ready(backend: tuple[str, int]) -> bool:
    """Whether the backend's /readyz answers 200 within a second."""
    try:
        async with asyncio.timeout(1.0):
            reader, writer = await asyncio.open_connection(*backend)
            try:
                writer.write(READYZ)
                status = await reader.readline()
            finally:
                writer.transport.abort()
    except (OSError, TimeoutError):
        return False
    return status.split(b" ", 2)[1:2] == [b"200"]
