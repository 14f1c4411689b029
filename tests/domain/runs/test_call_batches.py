"""The batch thread that the scheduler and the results thread share: every call
answered exactly once, with its own reply or error, on its event loop or in its
thread; the thread ends when idle and a call starts it again."""

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from arbiter.domain.runs import call_batches
from arbiter.domain.runs.call_batches import BatchThread, Finish, QueuedCall
from arbiter.storage import request_bounds
from arbiter.storage.request_bounds import RequestQueries
from tests import fresh_loop
from tests.jobs.support import wait_until

PATIENCE = 5.0  # s: how long a test waits for an answer before it fails


@dataclass(eq=False)
class Echo(QueuedCall):
    """A call whose reply names it; `fail` makes its reply an error."""

    number: int
    fail: bool = False


def take_all(queue: deque[Echo]) -> list[Echo]:
    return [queue.popleft() for _ in range(len(queue))]


class Server:
    """A `serve` for BatchThread that records its batches; while `gate` is clear
    it waits (so that calls queue up behind the batch it holds). With `bug`, it
    answers the first call of a batch, then raises."""

    def __init__(self, *, bug: bool = False) -> None:
        self.bug = bug
        self.batches: list[list[int]] = []
        self.served = 0
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, calls: list[Echo]) -> None:
        self.batches.append([call.number for call in calls])
        assert self.gate.wait(PATIENCE)
        for call in calls:
            self.served += 1
            call.reply = ValueError(f"call {call.number}") if call.fail else {"n": call.number}
            if self.bug:
                raise RuntimeError("a bug")


def batch_thread(
    server: Server, idle: float = 0.05, name: str = "test-batches"
) -> BatchThread[Echo]:
    return BatchThread(name, server, take_all, idle)


def hold(batches: BatchThread[Echo], server: Server) -> Callable[[], Any]:
    """Keep the thread busy with a first call (number 0), so that the next calls
    queue up and form one batch once `server.gate` is set."""
    server.gate.clear()
    held = blocking_in_thread(batches, 0)
    wait_until(lambda: server.batches[-1:] == [[0]], timeout=PATIENCE)
    return held


def in_thread(function: Callable[[], Any]) -> Callable[[], Any]:
    """Call `function` in a thread of its own; the returned function waits for
    its result (or raises its error) and fails if it takes too long."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except Exception as error:  # handed to the waiting test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def result() -> Any:
        thread.join(PATIENCE)
        assert not thread.is_alive(), "never answered"
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return result


def blocking_in_thread(batches: BatchThread[Echo], number: int) -> Callable[[], Any]:
    """`call_blocking` of call `number` in a thread of its own (see `in_thread`)."""
    return in_thread(lambda: batches.call_blocking(Echo(number=number)))


def test_calls_waiting_together_are_served_as_one_batch_each_with_its_reply() -> None:
    server = Server()
    batches = batch_thread(server)
    first = hold(batches, server)
    waiting = [blocking_in_thread(batches, n) for n in (1, 2, 3)]
    wait_until(lambda: batches.queued == 3)
    server.gate.set()
    assert first() == {"n": 0}
    assert [result() for result in waiting] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert server.batches[0] == [0]
    assert sorted(server.batches[1]) == [1, 2, 3]
    assert len(server.batches) == 2
    assert server.served == 4
    assert batches.queued == 0


def test_a_batch_is_served_as_a_request_that_nobody_abandons() -> None:
    """Its transactions are bounded as a request's (storage/request_bounds.py),
    and a caller that leaves cannot stop the others' calls."""
    seen: list[RequestQueries | None] = []

    def serve(calls: list[Echo]) -> None:
        seen.append(request_bounds.current())
        for call in calls:
            call.reply = {"n": call.number}

    batches = BatchThread("test-batches", serve, take_all, 0.05)
    assert batches.call_blocking(Echo(number=1)) == {"n": 1}
    assert request_bounds.current() is None  # the caller's own context is untouched
    (queries,) = seen
    assert queries is not None
    assert not queries.abandoned


def test_calls_from_an_event_loop_are_answered_on_it() -> None:
    batches = batch_thread(Server())

    async def ask() -> list[dict[str, Any]]:
        calls = [batches.call_async(Echo(number=n)) for n in range(4)]
        return await asyncio.wait_for(asyncio.gather(*calls), PATIENCE)

    assert fresh_loop.run(ask()) == [{"n": n} for n in range(4)]


def test_an_error_is_raised_to_its_caller_only() -> None:
    batches = batch_thread(Server())
    with pytest.raises(ValueError, match="call 1"):
        in_thread(lambda: batches.call_blocking(Echo(number=1, fail=True)))()
    assert blocking_in_thread(batches, 2)() == {"n": 2}

    async def ask() -> list[dict[str, Any] | BaseException]:
        calls = [batches.call_async(Echo(number=n, fail=n == 4)) for n in (3, 4, 5)]
        gathered = asyncio.gather(*calls, return_exceptions=True)
        return await asyncio.wait_for(gathered, PATIENCE)

    first, failed, last = fresh_loop.run(ask())
    assert (first, last) == ({"n": 3}, {"n": 5})
    assert isinstance(failed, ValueError)
    assert str(failed) == "call 4"


def test_a_serve_that_raises_answers_every_call_it_left_unanswered() -> None:
    """A bug in `serve` must not leave anybody waiting: the call it answered
    keeps its reply, the others get its error, and the thread goes on serving."""
    server = Server(bug=True)
    batches = batch_thread(server)
    held = hold(batches, server)

    async def ask() -> list[dict[str, Any] | BaseException]:
        calls = [asyncio.ensure_future(batches.call_async(Echo(number=n))) for n in (1, 2, 3)]
        await asyncio.to_thread(wait_until, lambda: batches.queued == 3)
        server.gate.set()
        gathered = asyncio.gather(*calls, return_exceptions=True)
        return await asyncio.wait_for(gathered, PATIENCE)

    first, *others = fresh_loop.run(ask())
    assert held() == {"n": 0}
    assert first == {"n": 1}
    assert [str(error) for error in others] == ["a bug", "a bug"]
    assert all(isinstance(error, RuntimeError) for error in others)
    assert sorted(server.batches[1]) == [1, 2, 3]
    assert blocking_in_thread(batches, 4)() == {"n": 4}


def test_the_thread_is_a_named_daemon_that_ends_when_idle_and_comes_back() -> None:
    batches = batch_thread(Server(), idle=0.5, name="test-batches-idle")
    assert (batches.running, batches.queued) == (False, 0)
    # From this (non-daemon) thread: the batch thread must not inherit that.
    assert batches.call_blocking(Echo(number=1)) == {"n": 1}
    assert batches.running  # idle, not yet ended
    found = [thread for thread in threading.enumerate() if thread.name == "test-batches-idle"]
    assert len(found) == 1
    assert found[0].daemon  # it never keeps the process from exiting
    wait_until(lambda: not batches.running, timeout=PATIENCE)
    found[0].join(PATIENCE)
    assert not found[0].is_alive()
    assert blocking_in_thread(batches, 2)() == {"n": 2}
    assert batches.running


def test_a_call_no_thread_can_serve_is_undone_and_not_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    undone: list[int] = []
    batches = BatchThread(
        "test-batches", Server(), take_all, 0.05, not_queued=lambda c: undone.append(c.number)
    )

    def refuse(thread: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        batches.submit(Echo(number=1))
    monkeypatch.undo()
    assert undone == [1]
    assert (batches.queued, batches.running) == (0, False)
    assert blocking_in_thread(batches, 2)() == {"n": 2}
    assert undone == [1]


def test_a_caller_gone_from_its_loop_does_not_stop_the_others_being_answered() -> None:
    """A future already cancelled (its caller gave up) or on a closed loop is
    skipped; the other calls of the batch, on that loop and elsewhere, get their
    replies."""
    server = Server()
    batches = batch_thread(server)
    closed = asyncio.new_event_loop()
    orphan = Echo(number=0, loop=closed, future=closed.create_future())
    closed.close()

    async def ask() -> list[dict[str, Any]]:
        server.gate.clear()
        batches.submit(orphan)
        await asyncio.to_thread(wait_until, lambda: server.batches == [[0]])
        loop = asyncio.get_running_loop()
        cancelled = Echo(number=1, loop=loop, future=loop.create_future())
        batches.submit(cancelled)
        assert cancelled.future is not None
        cancelled.future.cancel()
        calls = [asyncio.ensure_future(batches.call_async(Echo(number=n))) for n in (2, 3)]
        blocking = blocking_in_thread(batches, 4)
        await asyncio.to_thread(wait_until, lambda: batches.queued == 4)
        server.gate.set()
        replies = list(await asyncio.wait_for(asyncio.gather(*calls), PATIENCE))
        return [*replies, await asyncio.to_thread(blocking)]

    assert fresh_loop.run(ask()) == [{"n": 2}, {"n": 3}, {"n": 4}]
    assert sorted(server.batches[1]) == [1, 2, 3, 4]


def stream(batches: BatchThread[Echo], count: int, pause: float) -> list[Echo]:
    """`count` calls submitted `pause` apart, once all are answered."""
    calls = [Echo(number=n, done=threading.Event()) for n in range(count)]
    for call in calls:
        batches.submit(call)
        time.sleep(pause)
    assert all(call.done is not None and call.done.wait(PATIENCE) for call in calls)
    assert [call.reply for call in calls] == [{"n": n} for n in range(count)]
    return calls


def test_a_fast_stream_of_calls_is_gathered_into_few_batches_when_cpu_is_scarce() -> None:
    """About 200 calls a second with a 0.1 s gathering time: about 20 calls are
    expected meanwhile, so at full load the thread lets the queue fill before
    each batch."""
    server = Server()
    full = BatchThread("test-batches", server, take_all, 1.0, gather_seconds=0.1, load=lambda: 1.0)
    stream(full, 300, 0.005)
    assert len(server.batches) <= 300 / 4, server.batches


def test_while_cpu_is_plentiful_calls_are_not_kept_waiting() -> None:
    """The same stream in a process using under half a core: latency comes first."""
    server = Server()
    idle = BatchThread("test-batches", server, take_all, 1.0, gather_seconds=0.5, load=lambda: 0.4)
    for call in stream(idle, 20, 0.05):
        assert call.reply is not None
    assert len(server.batches) >= 15, server.batches


def test_the_gathering_time_grows_with_the_load() -> None:
    """Between GATHER_FROM_LOAD and GATHER_FULL_LOAD a share of the gathering time."""
    server = Server()
    middle = (call_batches.GATHER_FROM_LOAD + call_batches.GATHER_FULL_LOAD) / 2
    half = BatchThread(
        "test-batches", server, take_all, 1.0, gather_seconds=1.0, load=lambda: middle
    )
    stream(half, 40, 0.01)  # the rate is learnt: a call expected every 10 ms
    started = time.monotonic()
    assert blocking_in_thread(half, 99)() == {"n": 99}
    assert 0.25 < time.monotonic() - started < 0.9  # about half of 1 s


def test_the_process_load_is_the_cpu_used_per_second_of_wall_time() -> None:
    busy = call_batches.ProcessLoad(cpu_clock=time.monotonic)  # a core's worth
    idle = call_batches.ProcessLoad(cpu_clock=lambda: 0.0)
    for _ in range(15):
        time.sleep(0.1)
        loads = busy(), idle()
    assert loads[0] > 0.7
    assert loads[1] == 0.0


def test_calls_that_come_alone_are_not_kept_waiting_to_be_gathered() -> None:
    """One call a second with a 0.3 s gathering time: less than half a call is
    expected meanwhile, so each is served at once, not 0.3 s later."""
    server = Server()
    batches = BatchThread(
        "test-batches", server, take_all, 5.0, gather_seconds=0.3, load=lambda: 1.0
    )
    for number in range(3):
        started = time.monotonic()
        assert blocking_in_thread(batches, number)() == {"n": number}
        assert time.monotonic() - started < 0.25
        time.sleep(1.0)
    assert server.batches == [[0], [1], [2]]


def test_above_full_load_the_pause_is_the_gathering_time_not_more() -> None:
    server = Server()
    busy = BatchThread("test-batches", server, take_all, 1.0, gather_seconds=0.3, load=lambda: 5.0)
    stream(busy, 20, 0.01)  # the rate is learnt
    started = time.monotonic()
    assert blocking_in_thread(busy, 99)() == {"n": 99}
    assert 0.2 < time.monotonic() - started < 0.5


def test_a_thread_without_a_gathering_time_never_pauses() -> None:
    """The scheduler's thread: a fast stream at full load is still served at once."""
    server = Server()
    plain = BatchThread("test-batches", server, take_all, 1.0, load=lambda: 1.0)
    stream(plain, 20, 0.01)
    started = time.monotonic()
    assert blocking_in_thread(plain, 99)() == {"n": 99}
    assert time.monotonic() - started < 0.25


def test_calls_a_batch_leaves_behind_are_gathered_and_served_too() -> None:
    """A `take` that takes at most two: what it leaves waits its own pause."""

    def take_two(queue: deque[Echo]) -> list[Echo]:
        return [queue.popleft() for _ in range(min(2, len(queue)))]

    server = Server()
    batches = BatchThread(
        "test-batches", server, take_two, 1.0, gather_seconds=0.02, load=lambda: 1.0
    )
    stream(batches, 60, 0.002)
    assert max(len(batch) for batch in server.batches) == 2


class FakeCpu:
    """A CPU clock a test advances by hand."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


def test_the_process_load_follows_within_its_window_and_never_overshoots() -> None:
    cpu = FakeCpu()
    load = call_batches.ProcessLoad(cpu_clock=cpu)
    for _ in range(5):  # half a second at one core
        time.sleep(0.1)
        cpu.seconds += 0.1
        busy = load()
    assert 0.3 < busy <= 1.0
    time.sleep(1.2)  # longer than the window, with no CPU used: the load is that
    assert load() == 0.0


class Lifetime:
    """A `lifetime` for BatchThread that counts how often it was entered and left."""

    def __init__(self) -> None:
        self.entered = self.left = 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self.entered += 1
        try:
            yield
        finally:
            self.left += 1


def test_each_thread_serves_inside_its_lifetime_and_leaves_it_when_idle() -> None:
    lifetime = Lifetime()
    batches = BatchThread("test-batches-life", Server(), take_all, 0.05, lifetime=lifetime)
    assert batches.call_blocking(Echo(number=1)) == {"n": 1}
    assert batches.call_blocking(Echo(number=2)) == {"n": 2}
    assert (lifetime.entered, lifetime.left) == (1, 0)  # one lifetime for both batches
    wait_until(lambda: lifetime.left == 1, timeout=PATIENCE)
    assert batches.call_blocking(Echo(number=3)) == {"n": 3}
    assert lifetime.entered == 2  # a new thread, a new lifetime


def test_close_answers_what_is_queued_and_ends_the_thread_before_it_returns() -> None:
    lifetime, server = Lifetime(), Server()
    batches = BatchThread("test-batches-close", server, take_all, 60.0, lifetime=lifetime)
    first = hold(batches, server)
    waiting = blocking_in_thread(batches, 1)
    wait_until(lambda: batches.queued == 1)
    closing = in_thread(batches.close)
    server.gate.set()
    closing()
    # Returned at once though the idle time is a minute, every call answered, and
    # the lifetime left: nothing it held outlives close().
    assert (first(), waiting()) == ({"n": 0}, {"n": 1})
    assert (batches.running, lifetime.left) == (False, 1)
    assert batches.call_blocking(Echo(number=2)) == {"n": 2}  # a call after close is served
    batches.close()
    assert (lifetime.entered, lifetime.left) == (2, 2)


def test_closing_a_thread_that_is_not_running_does_nothing() -> None:
    batches = batch_thread(Server())
    batches.close()
    assert not batches.running


class Syncing:
    """A `serve` that leaves its replies to a Finish, as a batch that still waits
    for the disk does: each finish waits for `disk`, then answers (or, with
    `sync_fails`, raises as a failed sync would)."""

    def __init__(self, *, sync_fails: bool = False) -> None:
        self.sync_fails = sync_fails
        self.batches: list[list[int]] = []
        self.finished: list[list[int]] = []
        self.disk = threading.Event()
        self.gate = threading.Event()  # while clear, a batch being served waits
        self.gate.set()

    def __call__(self, calls: list[Echo]) -> Finish:
        numbers = [call.number for call in calls]
        self.batches.append(numbers)
        assert self.gate.wait(PATIENCE)
        for call in calls:  # refused at once: not waiting for the disk
            if call.fail:
                call.reply = ValueError(f"call {call.number}")

        def finish() -> None:
            assert self.disk.wait(PATIENCE)
            if self.sync_fails:
                raise OSError("fdatasync failed")
            for call in calls:
                if not call.fail:
                    call.reply = {"n": call.number}
            self.finished.append(numbers)

        return finish


def test_the_next_batch_is_served_while_the_last_waits_for_the_disk() -> None:
    """With calls waiting, the batch thread leaves a batch's finish to its settler
    and serves them meanwhile; nobody is answered before their finish returns."""
    server = Syncing()
    batches = BatchThread("test-batches-settled", server, take_all, 1.0)
    server.gate.clear()
    first = blocking_in_thread(batches, 1)
    wait_until(lambda: server.batches == [[1]], timeout=PATIENCE)
    second = blocking_in_thread(batches, 2)
    wait_until(lambda: batches.queued == 1, timeout=PATIENCE)
    server.gate.set()
    wait_until(lambda: server.batches == [[1], [2]], timeout=PATIENCE)
    time.sleep(0.1)
    assert server.finished == []  # both served, neither durable: nobody answered
    names = {thread.name for thread in threading.enumerate()}
    assert "test-batches-settled-settler" in names
    server.disk.set()
    assert (first(), second()) == ({"n": 1}, {"n": 2})
    assert sorted(server.finished) == [[1], [2]]


def test_with_nobody_waiting_the_batch_thread_finishes_the_batch_itself() -> None:
    """No call to serve meanwhile: no hop to a settler, whose thread never starts."""
    server = Syncing()
    batches = BatchThread("test-batches-alone", server, take_all, 0.05)
    waiting = blocking_in_thread(batches, 1)
    wait_until(lambda: server.batches == [[1]], timeout=PATIENCE)
    time.sleep(0.1)
    assert server.finished == []  # waiting for the disk, unanswered
    server.disk.set()
    assert waiting() == {"n": 1}
    assert batches.call_blocking(Echo(number=2)) == {"n": 2}
    assert batches._settler is None


def test_a_finish_that_fails_answers_its_waiting_calls_with_the_error() -> None:
    """A failed sync: every call still without a reply gets its error (nobody is
    told "saved"); a call answered at once, refused, keeps its own answer."""
    server = Syncing(sync_fails=True)
    batches = BatchThread("test-batches-failing", server, take_all, 0.05)
    server.disk.set()

    async def ask() -> list[dict[str, Any] | BaseException]:
        calls = [batches.call_async(Echo(number=n, fail=n == 2)) for n in (1, 2, 3)]
        gathered = asyncio.gather(*calls, return_exceptions=True)
        return await asyncio.wait_for(gathered, PATIENCE)

    replies = fresh_loop.run(ask())
    assert [type(reply) for reply in replies] == [OSError, ValueError, OSError]
    assert str(replies[1]) == "call 2"
    with pytest.raises(OSError, match="fdatasync failed"):  # still failing, still answered
        blocking_in_thread(batches, 4)()


def test_close_waits_for_the_batches_left_to_finish() -> None:
    server = Syncing()
    batches = BatchThread("test-batches-close-settled", server, take_all, 60.0)
    waiting = blocking_in_thread(batches, 1)
    wait_until(lambda: server.batches == [[1]], timeout=PATIENCE)
    closing = in_thread(batches.close)
    time.sleep(0.1)
    server.disk.set()
    closing()
    assert waiting() == {"n": 1}
    names = {thread.name for thread in threading.enumerate()}
    assert not names & {"test-batches-close-settled", "test-batches-close-settled-settler"}
