"""Real git repositories for the repos tests: an official Stockfish-shaped
repository, a fork of it with patches, and small helpers."""

import http.server
import os
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.org"]
IDENTITY += ["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"]

BIG_1, BIG_2, SMALL = "nn-aaaaaaaaaaaa.nnue", "nn-cccccccccccc.nnue", "nn-bbbbbbbbbbbb.nnue"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *IDENTITY, *args], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def evaluate_h(big: str, small: str = SMALL) -> str:
    return (
        "#ifndef EVALUATE_H_INCLUDED\n"
        f'#define EvalFileDefaultNameBig "{big}"\n'
        f'#define EvalFileDefaultNameSmall "{small}"\n'
        "#endif\n"
    )


def commit(repo: Path, message: str, files: dict[str, str] | None = None) -> str:
    for name, text in (files or {}).items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(repo, "add", name)
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Stockfishes:
    official: str  # file:// URL of the official repository
    fork: str  # file:// URL of a fork: master = official master, and branches
    first: str  # official master's first commit (Bench: 1000)
    master: str  # official master's head (Bench: 1100)
    patch: str  # fork's "patch" on master: a new big net, Bench: 1234
    old_patch: str  # fork's "old-patch", branched from `first`
    side: str  # fork's "side": a commit not on master, base of "on-side"
    orphan: str  # fork's "orphan": no common history


def make_stockfishes(root: Path, master_commits: int = 1) -> Stockfishes:
    official = root / "official"
    official.mkdir(parents=True)
    git(official, "init", "-q", "-b", "master")
    first = commit(
        official,
        "Initial\n\nBench: 1000",
        {"src/evaluate.h": evaluate_h(BIG_1), "src/main.cpp": "int main() {}\n"},
    )
    for n in range(master_commits - 1):
        commit(official, f"Filler {n}\n\nNo functional change", {"src/filler.txt": f"{n}\n"})
    master = commit(official, "Simplify search\n\nBench: 1100", {"src/main.cpp": "int main(){}\n"})
    fork = root / "fork"
    git(root, "clone", "-q", official.as_uri(), str(fork))
    git(fork, "checkout", "-q", "-b", "patch")
    patch = commit(
        fork,
        "Use a bigger net\n\nTrained longer.\n\nBench: 1234",
        {"src/evaluate.h": evaluate_h(BIG_2)},
    )
    git(fork, "checkout", "-q", "-b", "old-patch", first)
    old_patch = commit(fork, "Old idea\n\nBench: 999", {"src/main.cpp": "int main() { }\n"})
    git(fork, "checkout", "-q", "-b", "side", master)
    side = commit(fork, "Side experiment", {"src/side.txt": "x\n"})
    git(fork, "checkout", "-q", "--orphan", "orphan")
    git(fork, "rm", "-rq", "--cached", ".")
    orphan = commit(fork, "Unrelated\n\nBench: 5", {"README": "other\n"})
    git(fork, "clean", "-fdq")
    git(fork, "checkout", "-q", "master")
    return Stockfishes(
        official.as_uri(), fork.as_uri(), first, master, patch, old_patch, side, orphan
    )


class Tarpit:
    """A loopback listener that accepts every connection and never answers: the
    host that holds a git process until its timeout. Only 127.0.0.1."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(1024)
        self.port: int = self.socket.getsockname()[1]
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/engine.git"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return  # closed
            self.held.append(connection)  # kept open, never read, never answered

    def close(self) -> None:
        self.socket.close()
        for connection in self.held:
            connection.close()


class GitHttpServer:
    """`git http-backend` behind a tiny HTTP server on 127.0.0.1 (smart HTTP, as
    forges serve it), serving the repositories under `root`. `redirect_to`, when
    set, answers every request with a 301 there instead."""

    def __init__(self, root: Path, redirect_to: str = "") -> None:
        handler = _backend_handler(root, redirect_to)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port: int = self.server.server_address[1]
        self.requests = handler.requests
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, name: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _backend_handler(root: Path, redirect_to: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        requests: ClassVar[list[str]] = []

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            type(self).requests.append(self.path)
            if redirect_to:
                self.send_response(301)
                self.send_header("Location", redirect_to + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "REMOTE_ADDR": "127.0.0.1",
            }
            done = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
