"""One UCI engine process, driven synchronously by the thread that owns it.

Output is read with poll() and our own line buffer, so a read can wait for a
deadline and notice an abort event every POLL_SLICE seconds without a reader
thread. Only the last `info ... score` line of a search is parsed: the rest
is skipped unparsed, which keeps the per-move cost of the runner small.

Each engine runs in its own session (process group), so stopping it also
stops whatever its wrapper started. An engine whose parent dies gets EOF on
stdin, which UCI engines treat as `quit`.
"""

import contextlib
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

POLL_SLICE = 0.1  # s: how often a waiting read looks at the abort event
READ_SIZE = 65536
START_SECONDS = 30.0  # `uci` -> `uciok` on a loaded machine
READY_SECONDS = 60.0  # `isready` -> `readyok`: allocating a large Hash takes a while
QUIT_SECONDS = 1.0
MATE_SCORE = 30_000  # centipawns standing for "mate": beyond any real evaluation


class EngineFailure(Exception):  # noqa: N818 - a family name, the subclasses say which
    """The engine misbehaved; subclasses say how."""


class EngineDisconnected(EngineFailure):
    """The process exited or closed its output (a crash)."""


class EngineTimeout(EngineFailure):
    """No answer before the deadline."""


class EngineStartError(EngineFailure):
    """The engine could not be started or did not finish the UCI handshake."""


class UnknownOption(EngineFailure):
    """An option the run sets does not exist in the engine."""


class Aborted(Exception):  # noqa: N818 - a signal to unwind, not an error
    """The match is stopping; unwind without a result."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    move: str  # as the engine wrote it; "(none)" or "0000" when it has none
    score: int | None  # centipawns for the side to move; ±MATE_SCORE-ish for mates
    depth: int | None
    elapsed: float  # s from sending `go` to reading `bestmove`
    nodes: int = 0  # searched, as the last `info ... score` line says (0: not said)
    search_ms: int = 0  # the search's time by the same line


class UciEngine:
    def __init__(self, command: Sequence[str], cwd: Path, name: str) -> None:
        self.command = tuple(command)
        self.cwd = cwd
        self.name = name
        self.id_name = ""
        self.options: dict[str, str] = {}  # lower-case name -> the engine's spelling
        self._applied: dict[str, str] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._lines: deque[str] = deque()
        self._partial = b""
        self._poll = select.poll()

    # ---------------------------------------------------------------- life cycle

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, abort: threading.Event | None = None) -> None:
        """Start the process and do the UCI handshake; EngineStartError if it fails."""
        self.kill()
        try:
            self._process = subprocess.Popen(  # noqa: S603 - the engine we built
                self.command,
                cwd=self.cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                bufsize=0,
            )
        except OSError as error:
            message = f"{self.name}: cannot start {self.command[0]}: {error}"
            raise EngineStartError(message) from None
        assert self._process.stdout is not None
        self._poll = select.poll()
        self._poll.register(self._process.stdout.fileno(), select.POLLIN | select.POLLHUP)
        self._lines.clear()
        self._partial = b""
        self._applied = {}
        try:
            self._handshake(abort)
        except EngineFailure as failure:
            self.kill()
            raise EngineStartError(f"{self.name}: UCI handshake failed ({failure})") from None

    def _handshake(self, abort: threading.Event | None) -> None:
        self.send("uci")
        deadline = time.monotonic() + START_SECONDS
        options: dict[str, str] = {}
        while True:
            line = self.read_line(deadline, abort)
            if line == "uciok":
                break
            if line.startswith("id name "):
                self.id_name = line[8:].strip()
            elif line.startswith("option name "):
                name = line[12:].partition(" type ")[0].strip()
                options[name.lower()] = name
        self.options = options

    def quit(self) -> None:
        """Ask politely, then make sure: the process and its group are gone."""
        if self.alive:
            with contextlib.suppress(EngineFailure):
                self.send("quit")
            assert self._process is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(QUIT_SECONDS)
        self.kill()

    def kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()

    # ---------------------------------------------------------------- commands

    def configure(self, options: Mapping[str, str]) -> None:
        """`setoption` for each option whose value differs from what the engine has."""
        for name, value in options.items():
            if self._applied.get(name) == value:
                continue
            spelled = self.options.get(name.lower())
            if spelled is None:
                raise UnknownOption(f"{self.name} has no UCI option {name!r}")
            self.send(f"setoption name {spelled} value {value}")
            self._applied[name] = value

    def new_game(self) -> None:
        """Start a game; call `wait_ready` before the first search."""
        self.send("ucinewgame")
        self.send("isready")

    def wait_ready(self, abort: threading.Event | None = None) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while self.read_line(deadline, abort) != "readyok":
            pass

    def search(
        self, position: str, go: str, timeout: float, abort: threading.Event | None
    ) -> SearchResult:
        """Send the position and `go`, wait for `bestmove` at most `timeout` s."""
        return self.result(self.go(position, go), timeout, abort)

    def go(self, position: str, go: str) -> float:
        """Start a search; the time it started (time.monotonic), for `result`."""
        self.send(f"{position}\n{go}")
        return time.monotonic()

    def result(self, started: float, timeout: float, abort: threading.Event | None) -> SearchResult:
        """Wait for the `bestmove` of the search started at `started`, until
        `started + timeout`. Thinking time runs from `go` to `bestmove`."""
        deadline = started + timeout
        last_info = ""
        lines = self._lines
        while True:
            while not lines:
                self._fill(deadline, abort)
            line = lines.popleft()
            if line.startswith("bestmove"):
                elapsed = time.monotonic() - started
                break
            if line.startswith("info") and " score " in line:
                last_info = line
        parts = line.split()
        move = parts[1] if len(parts) > 1 else "(none)"
        score, depth = parse_info(last_info) if last_info else (None, None)
        nodes, search_ms = parse_speed(last_info)
        return SearchResult(move, score, depth, elapsed, nodes, search_ms)

    def stop_search(self, abort: threading.Event | None = None) -> bool:
        """After a timeout: `stop` and drain to `bestmove`; False if it never came."""
        try:
            self.send("stop")
            deadline = time.monotonic() + QUIT_SECONDS
            while not self.read_line(deadline, abort).startswith("bestmove"):
                pass
        except EngineFailure:
            return False
        return True

    # ---------------------------------------------------------------- pipes

    def send(self, text: str) -> None:
        if self._process is None or self._process.stdin is None:
            raise EngineDisconnected(f"{self.name} is not running")
        data = (text + "\n").encode()
        try:
            while data:
                written = os.write(self._process.stdin.fileno(), data)
                data = data[written:]
        except OSError:
            self.kill()
            raise EngineDisconnected(f"{self.name} closed its input") from None

    def read_line(self, deadline: float, abort: threading.Event | None = None) -> str:
        while not self._lines:
            self._fill(deadline, abort)
        return self._lines.popleft()

    def _fill(self, deadline: float, abort: threading.Event | None) -> None:
        process = self._process
        if process is None or process.stdout is None:
            raise EngineDisconnected(f"{self.name} is not running")
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineTimeout(f"{self.name} did not answer in time")
            ready = self._poll.poll(math.ceil(min(remaining, POLL_SLICE) * 1000))
            if abort is not None and abort.is_set():
                raise Aborted
            if ready:
                break
        try:
            chunk = os.read(process.stdout.fileno(), READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            self.kill()  # reap it now: `alive` must be false from here on
            raise EngineDisconnected(f"{self.name} exited (code {process.returncode})")
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        self._lines.extend(raw.decode("utf-8", "replace").rstrip("\r") for raw in complete)


def parse_speed(line: str) -> tuple[int, int]:
    """(nodes, milliseconds) of an `info` line; (0, 0) unless it says both."""
    tokens = line.split()
    try:
        nodes = int(tokens[tokens.index("nodes") + 1])
        search_ms = int(tokens[tokens.index("time") + 1])
    except (ValueError, IndexError):
        return 0, 0
    return (nodes, search_ms) if nodes > 0 and search_ms > 0 else (0, 0)


def parse_info(line: str) -> tuple[int | None, int | None]:
    """(score in centipawns for the side to move, depth) of an `info` line."""
    tokens = line.split()
    score: int | None = None
    depth: int | None = None
    try:
        if "depth" in tokens:
            depth = int(tokens[tokens.index("depth") + 1])
        at = tokens.index("score")
        kind, value = tokens[at + 1], int(tokens[at + 2])
    except (ValueError, IndexError):
        return score, depth
    if kind == "cp":
        score = value
    elif kind == "mate":
        score = MATE_SCORE - abs(value) if value > 0 else -MATE_SCORE + abs(value)
    return score, depth
