"""A webhook receiver on loopback: a real HTTP server in a thread that records
each request and answers the status codes a test queues (200 when none)."""

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)


@dataclass
class Receiver:
    url: str
    requests: list[Received] = field(default_factory=list)
    replies: list[int] = field(default_factory=list)  # next status codes, in order


@contextmanager
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            state.requests.append(Received(self.path, dict(self.headers.items()), body))
            code = state.replies.pop(0) if state.replies else 200
            self.send_response(code)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Drip:
    url: str = ""
    cut_at: list[float] = field(default_factory=list)  # when each sender hung up


@contextmanager
def dripping_receiver(pause: float = 0.3) -> Iterator[Drip]:
    """A receiver that reads the request, then drips its reply a byte every
    `pause` seconds without ever finishing it, until the sender hangs up.

    When the block ends it stops listening for good: closing a listening
    socket does not wake a thread blocked in accept(), which then kept the
    port listening and took a later test's connection to that port (the
    sender saw the connection closed without a reply). So the listener is
    shut down first, which wakes it, and every thread is joined."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()
    threads: list[threading.Thread] = []
    state = Drip()

    def drip(connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(65536)
                for byte in itertools.cycle(b"HTTP/1.1 200 OK\r\nx-drip: "):
                    if done.wait(pause):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                state.cut_at.append(time.monotonic())

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener shut down: no more
            while not done.is_set():
                connection, _ = listener.accept()
                worker = threading.Thread(target=drip, args=(connection,), daemon=True)
                threads.append(worker)
                worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    state.url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    try:
        yield state
    finally:
        done.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() that waits
        acceptor.join(10)
        listener.close()
        for worker in threads:
            worker.join(10)
