"""One thread that serves queued calls in batches, and how their callers wait.

The scheduler (request_task) and result ingestion (update_task) both turn many
concurrent calls into few transactions: a call joins a queue; one thread takes
every call waiting at once, serves them together (one transaction, one fsync)
and answers each. A caller on the event loop awaits an asyncio future and holds
no threadpool thread; any other thread blocks on an event. The thread starts
when a call comes and ends after `idle_seconds` without one.

A batch's transaction, commit and fsync cost the same whatever it holds
(the fleet benchmark: about 500 us of CPU for one update_task, 430 us an update in a batch
of four), so a thread may gather when CPU is scarce: given `gather_seconds`,
when calls arrive fast enough that at least half a call more is expected
meanwhile, the thread lets the first waiting call wait before it takes the
batch. How long follows the process's CPU load: nothing below GATHER_FROM_LOAD
of a core (latency first while CPU is cheap), all of `gather_seconds` from
GATHER_FULL_LOAD (CPU first near saturation), in proportion between. A call
that comes alone, at a low rate, is served at once.

A batch's fsync need not hold up the next batch: `serve` may return what is
left to do before its calls can be answered (wait for the disk, then hand out
the replies). When calls are already waiting for the next batch, a second
thread, the batch thread's settler, does that and answers them, in order,
while the batch thread serves the next batch; one fsync then often covers
several batches. With nobody waiting, the batch thread does it itself (a
thread hop for nothing costs CPU at low load). Nobody is answered before the
wait returns, so a caller told "saved" is never contradicted by a crash.

Its transactions are bounded as a request's are (storage/request_bounds.py).
Each thread runs inside its `lifetime` context: the runs services hold one
database connection there (storage's `connection_held`), since checking one
out and back in for every batch cost about 34 us of CPU. `close()` ends the
thread and so releases what it holds; the app calls it before it disposes of
the engine.

Threads: `submit`, `call_async` run on the event loop or any thread (they only
touch the queue, under a lock held for a few list operations); `call_blocking`
in any thread but the event loop's; the `serve` function on the batch thread,
what it returns on the settler.
"""

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from arbiter.storage import request_bounds
from arbiter.storage.durability import Durability


@dataclass(eq=False)
class QueuedCall:
    """What every queued call carries to be answered: through an asyncio future on
    its event loop, or by setting `done` (made only for a caller that blocks: an
    Event is a lock and a condition, a cost each call on the loop would pay for
    nothing). `serve` sets `reply` (or an exception)."""

    loop: asyncio.AbstractEventLoop | None = field(default=None, kw_only=True)
    future: "asyncio.Future[dict[str, Any]] | None" = field(default=None, kw_only=True)
    done: threading.Event | None = field(default=None, kw_only=True)
    reply: dict[str, Any] | Exception | None = field(default=None, kw_only=True)


CallT = TypeVar("CallT", bound=QueuedCall)

# What a batch's `serve` may leave to the settler: the steps (a wait for the disk,
# then the replies) after which its calls can be answered. A call still without
# a reply when it returns or raises gets the error.
Finish = Callable[[], None]

RATE_WINDOW = 1.0  # s: the arrival rate and the load are moving averages over about this long
GATHER_WHEN_EXPECTED = 0.5  # gather when this many more calls are expected meanwhile
GATHER_FROM_LOAD = 0.5  # cores of CPU the process uses: no gathering below
GATHER_FULL_LOAD = 0.8  # the whole gathering time from here on
CLOSE_SECONDS = 10.0  # close() waits this long at most for the queued calls to be answered


class ProcessLoad:
    """The process's CPU use in cores, a moving average over about RATE_WINDOW,
    brought up to date whenever it is read (a batch thread reads it once a batch)."""

    def __init__(self, cpu_clock: Callable[[], float] = time.process_time) -> None:
        self._cpu_clock = cpu_clock
        self._cores = 0.0
        self._at, self._cpu = time.monotonic(), cpu_clock()

    def __call__(self) -> float:
        now, cpu = time.monotonic(), self._cpu_clock()
        elapsed = now - self._at
        if elapsed > 0.0:
            weight = min(1.0, elapsed / RATE_WINDOW)
            self._cores += weight * ((cpu - self._cpu) / elapsed - self._cores)
            self._at, self._cpu = now, cpu
        return self._cores


class BatchThread(Generic[CallT]):
    """`serve(batch)` answers every call of `batch` (sets each one's `reply`), or
    returns a `Finish` that will, run on the settler; `take(queue)` removes the
    next batch from the queue, which it may reorder; `not_queued(call)` undoes
    what the caller did for a call that could not be queued (no thread could
    start)."""

    def __init__(
        self,
        name: str,
        serve: Callable[[list[CallT]], Finish | None],
        take: Callable[[deque[CallT]], list[CallT]],
        idle_seconds: float,
        not_queued: Callable[[CallT], None] = lambda call: None,
        *,
        gather_seconds: float = 0.0,
        load: Callable[[], float] | None = None,
        lifetime: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        self._name = name
        self._lifetime = lifetime  # the context each thread runs in (a held connection)
        self._closing = False  # the thread ends as soon as its queue is empty
        self._not_queued = not_queued
        self._serve = serve
        self._take = take
        self._idle_seconds = idle_seconds
        self._queue: deque[CallT] = deque()
        self._wakeup = threading.Condition()  # guards _queue and _thread
        self._thread: threading.Thread | None = None
        self._gather_seconds = gather_seconds
        self._load = load or ProcessLoad()
        self._first_queued_at = 0.0  # when the oldest waiting call was queued
        self._arrived = 0  # calls queued since the last batch was taken
        self._rate = 0.0  # calls a second, averaged over about RATE_WINDOW
        self._rated_at = time.monotonic()
        self._settler: BatchThread[_Settlement] | None = None  # made on first use

    @property
    def queued(self) -> int:
        """Calls waiting for the thread (not those it is serving)."""
        return len(self._queue)

    @property
    def running(self) -> bool:
        """Whether the thread exists now (it ends when idle)."""
        return self._thread is not None

    async def call_async(self, call: CallT) -> dict[str, Any]:
        """Queue `call` and wait for its reply on the running event loop."""
        loop = asyncio.get_running_loop()
        call.loop, call.future = loop, loop.create_future()
        self.submit(call)
        return await call.future

    def call_blocking(self, call: CallT) -> dict[str, Any]:
        """Queue `call` and block this (non-event-loop) thread until it is answered."""
        call.done = done = threading.Event()
        self.submit(call)
        done.wait()
        if isinstance(call.reply, Exception):
            raise call.reply
        assert call.reply is not None
        return call.reply

    def submit(self, call: CallT) -> None:
        """Queue `call`; raises RuntimeError (nothing queued) if no thread can start."""
        with self._wakeup:
            if self._thread is None:
                thread = threading.Thread(target=self._serve_forever, name=self._name, daemon=True)
                try:
                    thread.start()
                except RuntimeError:
                    self._not_queued(call)
                    raise
                self._thread = thread
            if not self._queue:
                self._first_queued_at = time.monotonic()
            self._queue.append(call)
            self._arrived += 1
            self._wakeup.notify()

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """End the thread once the calls queued now are answered, and wait for it,
        so that its lifetime (a held connection) is over when this returns: call
        it before the engine is disposed. A call submitted later starts a new
        thread. [any thread but the batch thread itself]"""
        with self._wakeup:
            thread = self._thread
            if thread is None:
                return
            self._closing = True
            self._wakeup.notify()
        thread.join(timeout)
        if self._settler is not None:  # the batch thread has handed it all it will
            self._settler.close(timeout)

    def _serve_forever(self) -> None:
        try:
            # Its transactions are made for requests: bounded like theirs, and
            # never abandoned (a batch holds many callers' calls).
            with request_bounds.serving(request_bounds.RequestQueries()), self._lifetime():
                self._serve_until_idle()
        finally:  # dying: the next call starts a new thread
            with self._wakeup:
                if self._thread is threading.current_thread():
                    self._thread = None

    def _serve_until_idle(self) -> None:
        while True:
            with self._wakeup:
                if not self._queue and not self._closing:
                    self._wakeup.wait(self._idle_seconds)
                if not self._queue:
                    # Said under the lock `submit` takes: a call queued from now
                    # on starts a new thread, while this one leaves its lifetime.
                    self._thread, self._closing = None, False
                    return
                pause = self._gather_pause()
            if pause > 0.0:
                time.sleep(pause)
            with self._wakeup:
                calls = self._take(self._queue)
                self._note_arrivals()
            try:
                finish = self._serve(calls)
            except Exception as error:  # a bug in serve: still, nobody waits forever
                _fail_unanswered(calls, error)
                finish = None
            if finish is None:
                answer(calls)
            else:
                self._settle(_Settlement(calls, finish))

    def _settle(self, settlement: "_Settlement") -> None:
        """Finish a batch and answer it: on the settler when calls wait (this
        thread serves them meanwhile), here otherwise, which saves the hop, or
        when no settler thread can start. [batch thread]"""
        if self._queue:
            if self._settler is None:
                self._settler = BatchThread(
                    f"{self._name}-settler", _settle_each, _take_all, self._idle_seconds
                )
            try:
                self._settler.submit(settlement)
                return
            except RuntimeError:
                pass
        _settle_each([settlement])

    def _gather_pause(self) -> float:
        """How long to let the queue fill before taking a batch (lock held)."""
        if self._rate * self._gather_seconds < GATHER_WHEN_EXPECTED:
            return 0.0
        load = (self._load() - GATHER_FROM_LOAD) / (GATHER_FULL_LOAD - GATHER_FROM_LOAD)
        if load <= 0.0:
            return 0.0
        gather = self._gather_seconds * min(load, 1.0)
        return self._first_queued_at + gather - time.monotonic()

    def _note_arrivals(self) -> None:
        """Fold the calls queued since the last batch into the rate (lock held)."""
        now = time.monotonic()
        elapsed = now - self._rated_at
        if elapsed <= 0.0:
            return
        weight = min(1.0, elapsed / RATE_WINDOW)
        self._rate += weight * (self._arrived / elapsed - self._rate)
        self._arrived, self._rated_at = 0, now
        if self._queue:  # what the batch left behind has waited since now
            self._first_queued_at = now


def reply_when_durable(
    durability: Durability, replies: "Sequence[tuple[QueuedCall, dict[str, Any] | Exception]]"
) -> Finish | None:
    """What a `serve` returns for a batch whose commits `durability` covers: the
    replies handed out only once the disk has them, by the settler if it must
    still wait for the sync (None: handed out now, nothing was left to sync)."""

    def finish() -> None:
        durability.wait()  # if the sync fails, these stay unanswered: its error
        for call, reply in replies:
            call.reply = reply

    if durability.pending:
        return finish
    finish()
    return None


@dataclass(eq=False)
class _Settlement(QueuedCall):
    """A served batch's calls and what remains before they are answered: queued
    to the settler, which answers the calls itself (nobody waits on this one)."""

    calls: Sequence[QueuedCall]
    finish: Finish


def _settle_each(settlements: list[_Settlement]) -> None:
    """The settler's serve: finish each batch in the order served and answer it
    (after the first wait for the disk, the others mostly find their commits
    synced already)."""
    for settlement in settlements:
        try:
            settlement.finish()
        except Exception as error:  # the sync failed: nobody is told "saved"
            _fail_unanswered(settlement.calls, error)
        answer(settlement.calls)


def _take_all(queue: "deque[_Settlement]") -> list[_Settlement]:
    taken = list(queue)
    queue.clear()
    return taken


def _fail_unanswered(calls: "Sequence[QueuedCall]", error: Exception) -> None:
    for call in calls:
        if call.reply is None:
            call.reply = error


def answer(calls: "Sequence[QueuedCall]") -> None:
    """Wake each caller: one callback per event loop for its calls, an event otherwise."""
    by_loop: dict[asyncio.AbstractEventLoop, list[QueuedCall]] = {}
    for call in calls:
        if call.loop is None:
            if call.done is not None:
                call.done.set()
        else:
            by_loop.setdefault(call.loop, []).append(call)
    for loop, waiting in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle, waiting)


def _settle(calls: list[QueuedCall]) -> None:
    """On the event loop: hand each call its reply (a caller may have gone)."""
    for call in calls:
        future = call.future
        if future is None or future.done():
            continue
        if isinstance(call.reply, Exception):
            future.set_exception(call.reply)
        elif call.reply is not None:
            future.set_result(call.reply)
