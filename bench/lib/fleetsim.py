"""Simulated workers speaking the real worker protocol, on an open-loop schedule.

Each worker lives like a real one: request_version then request_task; while
it holds a task, update_task with *cumulative* pentanomial stats and beat on
their own jittered periods; at the end of a task it asks for the next.
"Real cadence" is the reference's (reliability-performance.md B5): a beat
every 120 s, an update every 60 s, a task of about 30 min; `speedup`
divides every period.

Open loop: every request has an intended send time fixed by the schedule;
latency is measured from it, so a stalled server cannot hide its queue
(coordinated omission). One worker's requests stay sequential, as a real
worker's are, which the ledger needs.

Chaos: abrupt disconnects (send, then close before the reply; the worker
retries like a real one after a transport error), failed_task, and worker
crashes (the machine vanishes and comes back as a new one).

The ledger: per task, the last stats the server acknowledged and the stats
of an update whose outcome is unknown (sent, no reply). At the end the
server's run totals must equal the sum of acknowledged stats exactly, once
each in-doubt update is resolved against the stored task (it must hold
either the acknowledged or the in-doubt stats).
"""

import asyncio
import math
import random
import time
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from arbiter.stats.scheduling import STC, worker_task_cap
from bench.lib.httpclient import HttpError, Pool
from tests.domain.runs.support import worker

# Every time here is time.monotonic(): uvloop's loop.time() only moves once per
# loop iteration, in whole milliseconds, which is too coarse for latencies.
clock = time.monotonic
TOO_BUSY_MARK = "too busy"
# Symmetric game-pair vectors [LL, LD, DD, WD, WW] of one SPRT batch (16 pairs):
# the runs' Elo stays exactly 0, so an SPRT(-1, 1) never decides during a benchmark.
PAIR_VECTORS = ((1, 4, 6, 4, 1), (0, 5, 6, 5, 0), (2, 3, 6, 3, 2))
BATCH_PAIRS = 16
WORKER_CONCURRENCY = 16  # a 10+0.1 task is then 29 batches: about 30 min at one update a minute
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class Cadence:
    """Mean periods in seconds, already divided by the speedup."""

    beat: float = 120.0
    update: float = 60.0
    backoff: float = 15.0  # first wait after a refused request_task (doubles, capped)
    backoff_cap: float = 900.0
    retry: float = 15.0  # between update_task attempts after a transport error

    @classmethod
    def real(cls, speedup: float) -> "Cadence":
        base = cls()
        return cls(
            beat=base.beat / speedup,
            update=base.update / speedup,
            backoff=base.backoff / speedup,
            backoff_cap=base.backoff_cap / speedup,
            retry=base.retry / speedup,
        )


@dataclass(frozen=True)
class Chaos:
    disconnect: float = 0.002  # per update_task or beat: sent, then the socket is closed
    failed_task: float = 0.02  # per task: the worker gives it up with failed_task
    crash: float = 0.01  # per task: the worker vanishes and comes back as a new machine


Stats = tuple[int, int, int, tuple[int, ...]]  # wins, losses, draws, pentanomial
ZERO: Stats = (0, 0, 0, (0, 0, 0, 0, 0))


def add_pairs(stats: Stats, pairs: tuple[int, ...]) -> Stats:
    ll, ld, dd, wd, ww = pairs
    wins, losses, draws, penta = stats
    new_penta = tuple(a + b for a, b in zip(penta, pairs, strict=True))
    return (wins + 2 * ww + wd, losses + 2 * ll + ld, draws + ld + wd + 2 * dd, new_penta)


def stats_json(stats: Stats) -> dict[str, Any]:
    wins, losses, draws, penta = stats
    return {
        "wins": wins,
        "losses": losses,
        "draws": draws,
        "crashes": 0,
        "time_losses": 0,
        "pentanomial": list(penta),
    }


@dataclass
class TaskEntry:
    """The ledger's line for one task."""

    acked: Stats = ZERO
    in_doubt: Stats | None = None


class Ledger:
    def __init__(self) -> None:
        self.tasks: dict[tuple[str, int], TaskEntry] = {}

    def entry(self, run_id: str, task_id: int) -> TaskEntry:
        return self.tasks.setdefault((run_id, task_id), TaskEntry())

    def totals(self) -> dict[str, Stats]:
        by_run: dict[str, Stats] = {}
        for (run_id, _), entry in self.tasks.items():
            wins, losses, draws, penta = by_run.get(run_id, ZERO)
            won, lost, drawn, pairs = entry.acked
            by_run[run_id] = (
                wins + won,
                losses + lost,
                draws + drawn,
                tuple(a + b for a, b in zip(penta, pairs, strict=True)),
            )
        return by_run

    def in_doubt(self) -> list[tuple[str, int, TaskEntry]]:
        return [(r, t, e) for (r, t), e in self.tasks.items() if e.in_doubt is not None]


@dataclass
class Recorder:
    """Latencies from the intended send time, inside the measurement window."""

    window_start: float = 0.0
    window_end: float = math.inf
    latencies: dict[str, list[float]] = field(default_factory=dict)
    # The window's second of each latency (by intended send time), in step with it.
    seconds: dict[str, "array[int]"] = field(default_factory=dict)
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    events_by_second: Counter[tuple[str, int]] = field(default_factory=Counter)
    responses: int = 0  # every reply received, whole run (for CPU per request)
    late_sends: int = 0
    non_json: int = 0
    error_times: list[float] | None = None  # loop time of each error, when wanted

    def in_window(self, intended: float) -> bool:
        return self.window_start <= intended < self.window_end

    def reply(self, endpoint: str, intended: float, done: float) -> None:
        self.responses += 1
        if self.in_window(intended):
            took = done - intended
            second = int(intended - self.window_start)
            self.latencies.setdefault(endpoint, []).append(took)
            self.seconds.setdefault(endpoint, array("I")).append(second)

    def error(self, endpoint: str, kind: str, intended: float) -> None:
        if self.in_window(intended):
            self.errors[(endpoint, kind)] += 1
        if self.error_times is not None:
            self.error_times.append(clock())

    def event(self, name: str, intended: float) -> None:
        if self.in_window(intended):
            self.events[name] += 1
            self.events_by_second[(name, int(intended - self.window_start))] += 1


@dataclass
class Task:
    run_id: str
    task_id: int
    num_games: int


@dataclass
class FleetConfig:
    workers: int
    cadence: Cadence
    chaos: Chaos
    tokens: list[tuple[str, str]]  # (username, token); workers are spread over them
    ramp: float  # workers start uniformly over this many seconds
    seed: int = 1
    strict: bool = True  # check protocol replies (off for the hello baseline)
    timeout: float = 30.0
    update_tries: int = 5
    generation: int = 0  # distinct machine names per round against one server
    batches_per_update: int = 1  # SPRT batches (16 pairs) each update_task reports
    # Slots a machine offers, one drawn per machine: 16 gives 30-minute tasks of 29
    # updates; 3 or 4 give tasks of 5 to 7 updates (the heavy-assignment mix).
    concurrencies: tuple[int, ...] = (WORKER_CONCURRENCY,)
    # A real worker's beat only says it lives, which an update says too: when set,
    # each update restarts the beat timer, so beats come only between slow updates.
    beat_after_update: bool = False


class Fleet:
    """The workers, their shared ledger and recorder, and when to stop."""

    def __init__(self, config: FleetConfig, pool_for: Callable[[int], Pool]) -> None:
        self.config = config
        self.pool_for = pool_for
        self.ledger = Ledger()
        self.recorder = Recorder()
        self.stop_at = math.inf
        self.alive_after: dict[int, float] = {}  # worker -> time of its first ack after a mark
        self.mark: float | None = None

    async def run_until(self, stop_at: float) -> None:
        self.stop_at = stop_at
        workers = [SimWorker(self, i) for i in range(self.config.workers)]
        async with asyncio.TaskGroup() as group:
            for worker in workers:
                group.create_task(worker.live())

    def acknowledged(self, index: int, now: float) -> None:
        if self.mark is not None and index not in self.alive_after and now >= self.mark:
            self.alive_after[index] = now


def worker_info(
    username: str, prefix: str, rng: random.Random, concurrency: int = WORKER_CONCURRENCY
) -> dict[str, Any]:
    """A fresh machine's worker_info (JSON values), its unique key from `rng`."""
    tail = "-".join(f"{rng.getrandbits(16):04x}" for _ in range(3))
    machine = worker(
        username,
        unique_key=f"{prefix}-{tail}-{rng.getrandbits(48):012x}",
        concurrency=concurrency,
        max_memory=64000,
        worker_arch="x86-64-avx2",
    )
    info: dict[str, Any] = msgspec.to_builtins(machine)
    return info


class SimWorker:
    def __init__(self, fleet: Fleet, index: int) -> None:
        config = fleet.config
        self.fleet = fleet
        self.index = index
        self.rng = random.Random(config.seed * 1_000_003 + index)
        self.pool = fleet.pool_for(index)
        self.username, self.token = config.tokens[index % len(config.tokens)]
        self.headers = {
            "x-forwarded-for": f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"
        }
        self.machine = 0
        self.info = self._new_machine()
        self.backoff = config.cadence.backoff

    def _new_machine(self) -> dict[str, Any]:
        generation = self.fleet.config.generation * 10 + self.machine
        prefix = f"{self.index:x}g{generation}"[-8:]
        self.machine += 1
        self.concurrency = self.rng.choice(self.fleet.config.concurrencies)
        return worker_info(self.username, prefix, self.rng, self.concurrency)

    def jitter(self, period: float) -> float:
        return period * self.rng.uniform(0.5, 1.5)

    async def sleep_until(self, when: float) -> bool:
        """Sleep to `when`; False if the fleet stops first."""
        if when >= self.fleet.stop_at:
            await asyncio.sleep(max(0.0, self.fleet.stop_at - clock()))
            return False
        delay = when - clock()
        if delay > 0:
            await asyncio.sleep(delay)
        return True

    # ---- one request

    async def call(self, endpoint: str, payload: dict[str, Any], intended: float) -> Any:
        """The decoded reply (an HTTP error's JSON carries `_status`), or None after a
        transport error or a reply that is not a JSON object; errors are recorded by kind."""
        recorder = self.fleet.recorder
        now = clock()
        if now - intended > 0.01:
            recorder.late_sends += 1
        try:
            response = await self.pool.request(
                "POST", endpoint, _encode(payload), self.headers, self.fleet.config.timeout
            )
        except HttpError as error:
            recorder.error(endpoint, error.kind, intended)
            return None
        done = clock()
        recorder.reply(endpoint, intended, done)
        try:
            reply = _decode(response.body)
        except msgspec.DecodeError:
            recorder.non_json += 1
            recorder.error(endpoint, f"non-json-{response.status}", intended)
            return None
        if not isinstance(reply, dict):
            recorder.error(endpoint, f"not-an-object-{response.status}", intended)
            return None
        if response.status != 200:
            recorder.error(endpoint, f"http-{response.status} (json)", intended)
            return {**reply, "_status": response.status}
        if "error" in reply and self.fleet.config.strict:
            recorder.error(endpoint, "refused: " + _shorten(reply["error"]), intended)
        return reply

    def body(self, **extra: Any) -> dict[str, Any]:
        return {"password": self.token, "worker_info": self.info, **extra}

    # ---- a life

    async def live(self) -> None:
        start = clock() + self.rng.uniform(0, self.fleet.config.ramp)
        if not await self.sleep_until(start):
            return
        when = start
        while await self.sleep_until(when):
            task = await self.get_task(when)
            if task is None:
                when = clock() + self.jitter(self.backoff)
                self.backoff = min(2 * self.backoff, self.fleet.config.cadence.backoff_cap)
                continue
            self.backoff = self.fleet.config.cadence.backoff
            when = await self.play(task)

    async def get_task(self, intended: float) -> Task | None:
        reply = await self.call("/api/request_version", self.body(), intended)
        if reply is None or "version" not in reply:
            return None
        asked = clock()
        reply = await self.call("/api/request_task", self.body(), asked)
        if reply is None or "_status" in reply:
            return None
        if TOO_BUSY_MARK in str(reply.get("info", "")):
            self.fleet.recorder.event("request_task too busy", asked)
            return None
        self.fleet.recorder.event("request_task answered", asked)
        if "task_id" not in reply:
            if "error" not in reply:
                self.fleet.recorder.event("request_task no work", asked)
            return None
        self.fleet.acknowledged(self.index, clock())
        run = reply["run"]
        self.fleet.recorder.event("assignments", asked)
        task = Task(run["_id"], int(reply["task_id"]), int(run["my_task"]["num_games"]))
        if self.fleet.config.strict and (task.run_id, task.task_id) in self.fleet.ledger.tasks:
            # Recorded whatever the window: a task handed out twice breaks the ledger.
            self.fleet.recorder.errors[("/api/request_task", "task handed out twice")] += 1
        return task

    async def play(self, task: Task) -> float:
        """Play `task` to its end; returns when the worker next wants work."""
        cadence, chaos = self.fleet.config.cadence, self.fleet.config.chaos
        ledger = (
            self.fleet.ledger.entry(task.run_id, task.task_id) if self.fleet.config.strict else None
        )
        stats = ZERO
        per_update = self.fleet.config.batches_per_update
        # The hello baseline hands every machine the same task: cap it to what the
        # server gives this machine, so both sides see one schedule.
        games = min(task.num_games, worker_task_cap(STC, 1, self.concurrency, BATCH_PAIRS))
        batches = max(1, math.ceil(games / (2 * BATCH_PAIRS * per_update)))
        fail_at = self.rng.randrange(batches) if self.rng.random() < chaos.failed_task else None
        crash_at = self.rng.randrange(batches) if self.rng.random() < chaos.crash else None
        now = clock()
        next_update, next_beat = now + self.jitter(cadence.update), now + self.jitter(cadence.beat)
        for batch in range(batches):
            while next_beat < next_update:
                if not await self.sleep_until(next_beat) or not await self.beat(task, next_beat):
                    return next_beat
                next_beat += self.jitter(cadence.beat)
            if not await self.sleep_until(next_update):
                return next_update
            if batch == crash_at:
                return await self.crash(next_update)
            if batch == fail_at:
                await self.call(
                    "/api/failed_task", self.task_body(task, message="simulated"), next_update
                )
                return clock()
            for _ in range(min(per_update, games // (2 * BATCH_PAIRS) - batch * per_update)):
                stats = add_pairs(stats, self.rng.choice(PAIR_VECTORS))
            alive = await self.update(task, stats, ledger, next_update)
            next_update += self.jitter(cadence.update)
            if self.fleet.config.beat_after_update:
                next_beat = clock() + self.jitter(cadence.beat)
            if not alive:
                break
        return clock()

    def task_body(self, task: Task, **extra: Any) -> dict[str, Any]:
        return self.body(run_id=task.run_id, task_id=task.task_id, **extra)

    async def beat(self, task: Task, intended: float) -> bool:
        body = self.task_body(task)
        if self.rng.random() < self.fleet.config.chaos.disconnect:
            await self._drop("/api/beat", body, intended)
            return True
        reply = await self.call("/api/beat", body, intended)
        if reply is None or reply.get("_status") == 503:
            return True  # a real worker beats again later
        if reply.get("task_alive") is True:
            self.fleet.acknowledged(self.index, clock())
            return True
        return False

    async def update(
        self, task: Task, stats: Stats, ledger: TaskEntry | None, intended: float
    ) -> bool:
        """Send cumulative `stats` until an answer; False when the task is over."""
        body = self.task_body(task, stats=stats_json(stats))
        if ledger is not None:
            ledger.in_doubt = stats
        if self.rng.random() < self.fleet.config.chaos.disconnect:
            await self._drop("/api/update_task", body, intended)
            intended = clock()  # a real worker retries at once on a new connection
        for _ in range(self.fleet.config.update_tries):
            reply = await self.call("/api/update_task", body, intended)
            if reply is not None and reply.get("_status", 200) != 503:
                return self._settle(reply, stats, ledger)
            intended = clock() + self.jitter(self.fleet.config.cadence.retry)
            if not await self.sleep_until(intended):
                return False
        return False  # given up; the update stays in doubt

    def _settle(self, reply: dict[str, Any], stats: Stats, ledger: TaskEntry | None) -> bool:
        applied = not {"error", "info", "_status"} & reply.keys() and "task_alive" in reply
        # "not active" (`info`) does not settle it: a copy of this very update sent
        # before an abrupt disconnect may have been applied and ended the task.
        if ledger is not None and "info" not in reply:
            ledger.in_doubt = None
            if applied:
                ledger.acked = stats
        if applied:
            self.fleet.acknowledged(self.index, clock())
        return applied and reply["task_alive"] is True

    async def _drop(self, endpoint: str, body: dict[str, Any], intended: float) -> None:
        self.fleet.recorder.event("abrupt disconnects", intended)
        try:
            await self.pool.send_and_drop(endpoint, _encode(body), self.headers)
        except HttpError as error:
            self.fleet.recorder.error(endpoint, error.kind, intended)

    async def crash(self, when: float) -> float:
        """The machine dies without a word and comes back later as a new one."""
        self.fleet.recorder.event("worker crashes", when)
        self.info = self._new_machine()
        return when + self.jitter(self.fleet.config.cadence.backoff)


def _shorten(message: object) -> str:
    text = str(message)
    for marker in (" for task", " for run", " (", ": task"):
        text = text.split(marker, 1)[0]
    return text[:70]


TAIL_SAMPLES = 10  # samples above a percentile for it to be shown as one


def supported(count: int, q: float) -> bool:
    """Whether `count` samples put at least TAIL_SAMPLES above the q-th percentile;
    below that, the nearest-rank "percentile" is one of the few largest values."""
    return round(count * (100.0 - q) / 100.0, 6) >= TAIL_SAMPLES  # 100 - 99.9 is 0.0999...


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of `values` (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]
