"""Real git repositories for the repos tests: an official Stockfish-shaped
repository, a fork of it with patches, and small helpers."""

import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

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
