"""A stand-in for the official Fishtest worker, as its protocol behaviour goes.

It plays no chess (no fastchess or Stockfish builds here): results come from a
seeded generator that favours the new engine. Everything the server sees is
what the official worker sends and when: its worker_info (no `hosted_books`,
so the server must treat it as the official worker), credentials as the
account password, the book fetched only from the books repository as
`<name>.zip` and checked against `book_sri` as the official worker hashes it
(the text, line endings translated), updates of cumulative stats after every
full batch (`2 * sprt.batch_size` games for SPRT; `concurrency * 4` otherwise)
and at the end, `task_alive` obeyed, the task's PGN uploaded gzipped and
base64-encoded, `failed_task` on a bad book, and the fleet exit when there is
no work.

Replies are taken as the official worker's `send_api_post_request` and its
callers take them (tests/web/official_replies.py): a reply that is not a JSON
object, or no reply, is a network problem (`NetworkProblemError`), which
request_version and request_task wait out and update_task retries 5 times
(`retry_wait` apart instead of 15 s); a JSON object with `error` is final:
request_version's ends the worker, update_task's drops the task, and each is
kept in `final`.
"""

import base64
import contextlib
import gzip
import hashlib
import io
import random
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx

PROTOCOL = 325
# Pair outcomes LL, LD, DD/WL, WD, WW: the new engine is clearly stronger.
PAIR_WEIGHTS = (0.03, 0.12, 0.40, 0.27, 0.18)


def official_text_hash(path: Path) -> str:
    """The official worker's book hash: text mode, then UTF-8."""
    return base64.b64encode(hashlib.sha384(path.read_text().encode("utf8")).digest()).decode()


@dataclass
class TaskLog:
    run_id: str
    task_id: int
    games: int = 0
    acknowledged: int = 0  # games the server said it saved
    pgn: str = ""  # the PGN text uploaded
    alive_at_end: bool = True


UPDATE_TRIES = 5  # the official worker's update_task attempts


class NetworkProblemError(Exception):
    """What the official worker's WorkerException from send_api_post_request means."""


@dataclass
class OfficialLikeWorker:
    server: str
    username: str
    password: str
    books_url: str  # the books repository (a stub of it, offline)
    books_dir: Path
    concurrency: int = 2
    seed: int = 1
    tasks: list[TaskLog] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    final: list[str] = field(default_factory=list)  # final refusals met (goal: none)
    network_problems: int = 0
    temporary_refusals: int = 0  # of them, 429s and 503s whose body is a JSON string
    retry_wait: float = 0.2  # s; the official worker waits 15 s, doubling
    batch_pause: float = 0.0  # s between batches: a slower machine
    patience: float = 120.0  # s of network problems before run_fleet gives up

    def worker_info(self) -> dict[str, Any]:
        return {
            "uname": "Linux 6.1.0",
            "architecture": ["64bit", "ELF"],
            "concurrency": self.concurrency,
            "max_memory": 4000,
            "min_threads": 1,
            "username": self.username,
            "version": PROTOCOL,
            "python_version": [3, 11, 7],
            "gcc_version": [12, 2, 0],
            "compiler": "g++",
            "unique_key": f"offi{self.seed}-8c3e-4b6f-9d2a-1f0e7c5b3a9d",
            "modified": False,
            "ARCH": "?",
            "nps": 0.0,
            "near_github_api_limit": False,
            "worker_arch": "x86-64-bmi2",
        }

    def send(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """send_api_post_request: the reply object, or NetworkProblemError."""
        try:
            reply = httpx.post(f"{self.server}{path}", json=body, timeout=30)
            data = reply.json()
        except (httpx.HTTPError, ValueError) as error:
            self.network_problems += 1
            raise NetworkProblemError(f"{path}: {error}") from None
        if not isinstance(data, dict):
            self.network_problems += 1
            if reply.status_code in (429, 503) and isinstance(data, str):
                self.temporary_refusals += 1  # Arbiter's "come back later"
            raise NetworkProblemError(f"{path}: HTTP {reply.status_code}, {data!r}")
        assert "duration" in data, (path, data)
        return data

    def post(self, path: str, **fields: Any) -> dict[str, Any]:
        body = {"password": self.password, "worker_info": self.worker_info(), **fields}
        return self.send(path, body)

    def patiently(self, path: str) -> dict[str, Any]:
        """A call of the main loop: network problems waited out, as the loop
        does (`retry_wait` apart), for up to `patience` seconds. request_version
        names only the user, as the official worker's does."""
        if path == "/api/request_version":
            body = {"password": self.password, "worker_info": {"username": self.username}}
        else:
            body = {"password": self.password, "worker_info": self.worker_info()}
        deadline = time.monotonic() + self.patience
        while True:
            try:
                return self.send(path, body)
            except NetworkProblemError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(self.retry_wait)

    def run_fleet(self, max_tasks: int = 200) -> int:
        """Take tasks until the server has none (the fleet exit); the number played."""
        for played in range(max_tasks):
            version = self.patiently("/api/request_version")
            if "error" in version:
                self.final.append(f"request_version: {version['error']}")
                return played  # "Invalid or missing credentials": the worker exits
            assert version["version"] == PROTOCOL, version
            reply = self.patiently("/api/request_task")
            if "error" in reply or "task_waiting" in reply:
                return played
            if not self.play(reply["run"], reply["task_id"]):
                return played
        raise AssertionError(f"more than {max_tasks} tasks")

    def update(self, run_id: str, task_id: int, stats: dict[str, Any]) -> dict[str, Any] | None:
        """update_task as the official worker sends it: the reply, or None when
        the task is dropped (a final reply, or the tries used up)."""
        for _ in range(UPDATE_TRIES):
            try:
                reply = self.post("/api/update_task", run_id=run_id, task_id=task_id, stats=stats)
            except NetworkProblemError:
                time.sleep(self.retry_wait)
                continue
            if "error" in reply:
                self.final.append(f"update_task: {reply['error']}")
                return None
            return reply
        self.final.append("update_task: too many failed update attempts")
        return None

    def play(self, run: dict[str, Any], task_id: int) -> bool:
        args = run["args"]
        book = self.fetch_book(args["book"], args.get("book_sri"))
        if book is None:
            with contextlib.suppress(NetworkProblemError):  # printed, nothing more
                self.post("/api/failed_task", run_id=run["_id"], task_id=task_id, message="sri")
            return False
        log = TaskLog(run["_id"], task_id)
        self.tasks.append(log)
        games_to_play = int(run["my_task"]["num_games"])
        if "sprt" in args:
            batch = 2 * int(args["sprt"].get("batch_size", 1))
            assert games_to_play % batch == 0, (games_to_play, batch)
        else:
            batch = self.concurrency * 4
        pairs = [0] * 5
        rng = random.Random(f"{self.seed}-{run['_id']}-{task_id}")
        openings = book.read_text().splitlines()
        games: list[str] = []
        while log.games < games_to_play:
            step = min(batch, games_to_play - log.games)
            for _ in range(step // 2):
                outcome = rng.choices(range(5), PAIR_WEIGHTS)[0]
                pairs[outcome] += 1
                games += pair_pgn(run, len(games), openings[len(games) % len(openings)], outcome)
            log.games += step
            time.sleep(self.batch_pause)
            reply = self.update(run["_id"], task_id, stats_of(pairs))
            if reply is None:
                return False  # the task and the batch's games are lost
            log.acknowledged = log.games
            if not reply["task_alive"]:
                log.alive_at_end = False
                break
        log.pgn = "".join(games)
        self.upload_pgn(run["_id"], task_id, log.pgn)
        return True

    def fetch_book(self, name: str, sri: str | None) -> Path | None:
        path = self.books_dir / name
        if path.exists() and official_text_hash(path) == sri:
            return path
        reply = httpx.get(f"{self.books_url}/{name}.zip", timeout=30)
        if reply.status_code != 200:
            self.failed.append(f"{name}: HTTP {reply.status_code}")
            return None
        with zipfile.ZipFile(io.BytesIO(reply.content)) as archive:
            archive.extractall(self.books_dir)
        if official_text_hash(path) != sri:
            self.failed.append(f"{name}: sri {official_text_hash(path)} != {sri}")
            return None
        return path

    def upload_pgn(self, run_id: str, task_id: int, pgn: str) -> None:
        buffer = io.BytesIO()
        with gzip.GzipFile(filename=f"{run_id}-{task_id}.pgn.gz", mode="wb", fileobj=buffer) as gz:
            gz.write(pgn.encode())
        encoded = base64.b64encode(buffer.getvalue()).decode()
        try:
            reply = self.post("/api/upload_pgn", run_id=run_id, task_id=task_id, pgn=encoded)
        except NetworkProblemError as problem:
            self.failed.append(f"upload_pgn: {problem}")  # the task's PGN is lost
            return
        assert "error" not in reply, reply


def stats_of(pairs: list[int]) -> dict[str, Any]:
    """Cumulative stats as fastchess reports them: DD and WL pairs are both draws
    of the pair; here every middle pair is two draws."""
    ll, ld, dd, wd, ww = pairs
    return {
        "wins": wd + 2 * ww,
        "losses": ld + 2 * ll,
        "draws": ld + 2 * dd + wd,
        "crashes": 0,
        "time_losses": 0,
        "pentanomial": list(pairs),
    }


def pair_pgn(run: dict[str, Any], number: int, fen: str, outcome: int) -> list[str]:
    """Two short PGN games (the new engine first as white, then as black)."""
    results = {0: ("0-1", "1-0"), 1: ("0-1", "1/2-1/2"), 2: ("1/2-1/2", "1/2-1/2")}
    results |= {3: ("1-0", "1/2-1/2"), 4: ("1-0", "0-1")}
    first, second = results[outcome]
    new, base = f"New-{run['args']['resolved_new'][:8]}", f"Base-{run['args']['resolved_base'][:8]}"
    fen = " ".join(fen.split()[:4]) + " 0 1"
    return [
        game_pgn(number + 1, new, base, first, fen),
        game_pgn(number + 2, base, new, second, fen),
    ]


def game_pgn(round_: int, white: str, black: str, result: str, fen: str) -> str:
    headers = {
        "Event": "Fishtest",
        "Round": str(round_),
        "White": white,
        "Black": black,
        "Result": result,
        "FEN": fen,
        "SetUp": "1",
    }
    head = "".join(f'[{key} "{value}"]\n' for key, value in headers.items())
    return f"{head}\n{{book exit}} {result}\n\n"
