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
    Every connection it accepts is closed when the block ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()
    held: list[socket.socket] = []
    state = Drip()

    def drip(connection: socket.socket) -> None:
        try:
            connection.recv(65536)
            for byte in itertools.cycle(b"HTTP/1.1 200 OK\r\nx-drip: "):
                if done.wait(pause):
                    return
                connection.sendall(bytes([byte]))
        except OSError:
            state.cut_at.append(time.monotonic())

    def accept() -> None:
        with contextlib.suppress(OSError):
            while not done.is_set():
                connection, _ = listener.accept()
                held.append(connection)
                threading.Thread(target=drip, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    state.url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    try:
        yield state
    finally:
        done.set()
        listener.close()
        for connection in held:
            connection.close()
