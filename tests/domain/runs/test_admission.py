"""The request_task admission gate: places shared by every account, a share each."""

import asyncio
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import pytest

from arbiter.domain.runs.admission import AdmissionGate, fair_share
from arbiter.telemetry import TOO_BUSY
from tests import fresh_loop
from tests.jobs.support import wait_until

PATIENCE = 10.0  # s: long enough never to run out in a test that expects a place


def test_the_default_share_is_half_the_gate_at_least_one() -> None:
    assert [fair_share(size) for size in (1, 2, 3, 5, 10)] == [1, 1, 1, 2, 5]


def test_one_account_holds_at_most_its_share_and_others_get_the_rest() -> None:
    gate = AdmissionGate(threading.Semaphore(5), per_account=2)
    assert [gate.enter("flood") for _ in range(4)] == [True, True, False, False]
    assert [gate.enter("alice") for _ in range(2)] == [True, True]
    assert gate.enter("bob")  # the fifth place
    assert not gate.enter("carol")  # the gate itself is full
    gate.leave("bob")
    assert gate.enter("carol")


def test_accounts_are_counted_case_insensitively() -> None:
    gate = AdmissionGate(threading.Semaphore(5), per_account=2)
    assert gate.enter("Flood")
    assert gate.enter("FLOOD")
    assert not gate.enter("flood")
    assert gate.held_by("fLoOd") == 2
    gate.leave("flood")
    assert gate.enter("Flood")


def test_a_place_given_back_frees_both_the_account_and_the_gate() -> None:
    places = threading.Semaphore(2)
    gate = AdmissionGate(places, per_account=1)
    assert gate.enter("alice")
    gate.leave("Alice")
    assert gate.held_by("alice") == 0
    assert gate.enter("alice")
    assert gate.enter("bob")
    assert not places.acquire(blocking=False)  # both places are taken again


def test_without_a_cap_one_account_may_fill_the_gate() -> None:
    gate = AdmissionGate(threading.Semaphore(3), per_account=None)
    assert [gate.enter("flood") for _ in range(4)] == [True, True, True, False]


def test_a_share_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="per_account"):
        AdmissionGate(threading.Semaphore(5), per_account=0)


def test_concurrent_callers_never_exceed_the_share_or_the_gate() -> None:
    """40 threads of one account and 3 of others enter and leave at once, many
    times: at no moment does the flood hold more than its share, and the other
    accounts are never shut out by it."""
    size, share = 5, 2
    gate = AdmissionGate(threading.Semaphore(size), per_account=share)
    lock = threading.Lock()
    holding = {"flood": 0, "others": 0}
    most = {"flood": 0, "total": 0}
    refused_others = 0
    start = threading.Barrier(43)

    def caller(account: str, kind: str) -> None:
        nonlocal refused_others
        start.wait()
        for _ in range(300):
            if not gate.enter(account):
                if kind == "others":
                    with lock:
                        refused_others += 1
                continue
            with lock:
                holding[kind] += 1
                most["flood"] = max(most["flood"], holding["flood"])
                most["total"] = max(most["total"], holding["flood"] + holding["others"])
            with lock:
                holding[kind] -= 1
            gate.leave(account)

    with ThreadPoolExecutor(max_workers=43) as pool:
        for _ in range(40):
            pool.submit(caller, "Flood", "flood")
        for name in ("alice", "bob", "carol"):
            pool.submit(caller, name, "others")
    assert most["flood"] <= share
    assert most["total"] <= size
    # Three other accounts, one call each at a time, always fit in the 3 places
    # the flood cannot take.
    assert refused_others == 0
    assert gate.held_by("flood") == 0


def test_holds_share_tells_an_accounts_refusal_from_a_full_gate() -> None:
    gate = AdmissionGate(threading.Semaphore(3), per_account=2)
    assert gate.enter("flood")
    assert not gate.holds_share("flood")
    assert gate.enter("Flood")
    assert gate.holds_share("FLOOD")  # its next call is refused for its share
    assert gate.enter("alice")
    assert not gate.enter("alice")  # the gate is full: not alice's doing
    assert not gate.holds_share("alice")
    assert not AdmissionGate(threading.Semaphore(1), per_account=None).holds_share("x")


def test_a_share_below_one_place_is_refused_with_its_reason() -> None:
    with pytest.raises(ValueError, match=r"\Aper_account must be at least 1\Z"):
        AdmissionGate(threading.Semaphore(5), per_account=0)


def test_the_gate_remembers_only_accounts_holding_a_place() -> None:
    """Memory stays bounded by the gate's size, not by every account ever seen
    (white-box: the count of places per account is the only state it keeps)."""
    gate = AdmissionGate(threading.Semaphore(5), per_account=2)
    for index in range(100):
        assert gate.enter(f"account{index}")
        gate.leave(f"account{index}")
    assert gate.enter("alice")
    assert dict(gate._held) == {"alice": 1}


async def settle() -> None:
    """Let the loop run the callbacks already scheduled (a hand-over, a timer)."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_a_call_past_its_share_gets_a_place_its_account_gives_back() -> None:
    """The account never holds more than its share: the place goes from the call
    that leaves to the one waiting, and the gate's count does not move."""
    places = threading.Semaphore(5)
    gate = AdmissionGate(places, per_account=2)

    async def scenario() -> list[object]:
        assert [gate.enter("flood"), gate.enter("flood")] == [True, True]
        waiting = asyncio.ensure_future(gate.enter_or_wait("FLOOD", PATIENCE))
        await settle()
        seen: list[object] = [waiting.done(), gate.held_by("flood")]
        # Given back by the assignment thread, as in the server.
        await asyncio.to_thread(gate.leave, "flood")
        seen += [await asyncio.wait_for(waiting, PATIENCE), gate.held_by("flood")]
        return seen

    assert fresh_loop.run(scenario()) == [False, 2, True, 2]
    assert gate.occupied() == 2
    assert [places.acquire(blocking=False) for _ in range(4)] == [True, True, True, False]


def test_a_call_within_its_share_or_at_a_full_gate_does_not_wait() -> None:
    gate = AdmissionGate(threading.Semaphore(3), per_account=2)

    async def scenario() -> tuple[bool, bool, float]:
        entered = await gate.enter_or_wait("alice", PATIENCE)
        assert [gate.enter("bob"), gate.enter("bob")] == [True, True]
        started = time.monotonic()
        refused = await gate.enter_or_wait("carol", PATIENCE)  # full: nobody's doing
        return entered, refused, time.monotonic() - started

    entered, refused, waited = fresh_loop.run(scenario())
    assert entered
    assert not refused
    assert waited < 1.0


def test_a_waiting_call_is_refused_when_its_patience_runs_out() -> None:
    gate = AdmissionGate(threading.Semaphore(5), per_account=1)

    async def scenario() -> tuple[bool, float]:
        assert gate.enter("alice")
        started = time.monotonic()
        return await gate.enter_or_wait("alice", 0.2), time.monotonic() - started

    granted, waited = fresh_loop.run(scenario())
    assert not granted
    assert waited >= 0.2
    gate.leave("alice")  # nobody waits any more: the place goes back to the gate
    assert gate.occupied() == 0
    assert gate._waiting == {}


def test_only_a_share_of_calls_wait_for_places_the_rest_are_refused_after_the_pause() -> None:
    """A flood keeps at most `per_account` calls in line; the others are refused,
    but only once their patience is over, so a client re-sending at once is
    slowed down."""
    gate = AdmissionGate(threading.Semaphore(5), per_account=2)

    async def scenario() -> tuple[list[bool], float, list[bool]]:
        assert [gate.enter("flood"), gate.enter("flood")] == [True, True]
        started = time.monotonic()
        calls = [asyncio.ensure_future(gate.enter_or_wait("flood", 0.3)) for _ in range(5)]
        await settle()
        assert len(gate._waiting["flood"]) == 2
        gate.leave("flood")
        gate.leave("flood")
        outcomes = list(await asyncio.gather(*calls))
        elapsed = time.monotonic() - started
        return outcomes, elapsed, [gate.enter("alice"), gate.enter("bob"), gate.enter("carol")]

    outcomes, elapsed, others = fresh_loop.run(scenario())
    assert outcomes == [True, True, False, False, False]
    assert elapsed >= 0.3
    assert others == [True, True, True]  # the flood still holds only its two places
    assert gate.held_by("flood") == 2


def test_a_waiting_call_that_is_cancelled_leaves_the_line() -> None:
    gate = AdmissionGate(threading.Semaphore(5), per_account=1)

    async def scenario() -> None:
        assert gate.enter("alice")
        waiting = asyncio.ensure_future(gate.enter_or_wait("alice", PATIENCE))
        await settle()
        waiting.cancel()
        await settle()
        assert gate._waiting == {}
        gate.leave("alice")

    fresh_loop.run(scenario())
    assert gate.occupied() == 0


def test_a_place_handed_to_a_call_cancelled_meanwhile_goes_on() -> None:
    """The hand-over is on its way when the caller goes (a client disconnects): the
    place passes to the next in line, or back to the gate, never lost."""
    gate = AdmissionGate(threading.Semaphore(5), per_account=1)

    async def scenario() -> bool:
        assert gate.enter("alice")
        first = asyncio.ensure_future(gate.enter_or_wait("alice", PATIENCE))
        await settle()
        gate.leave("alice")  # the hand-over to `first` is scheduled, not yet run
        first.cancel()
        await settle()
        assert first.cancelled()
        return gate.enter("alice")  # the place came back: alice may take it again

    assert fresh_loop.run(scenario())
    gate.leave("alice")
    assert gate.occupied() == 0


def test_a_call_cancelled_after_its_place_arrived_gives_it_back() -> None:
    gate = AdmissionGate(threading.Semaphore(5), per_account=1)

    async def scenario() -> None:
        assert gate.enter("alice")
        waiting = asyncio.ensure_future(gate.enter_or_wait("alice", PATIENCE))
        await settle()
        gate.leave("alice")
        await asyncio.sleep(0)  # the hand-over runs: the waiter has its place
        waiting.cancel()  # before the waiting call resumed
        await settle()
        assert waiting.cancelled()

    fresh_loop.run(scenario())
    assert gate.occupied() == 0
    assert gate._waiting == {}


def test_a_place_for_a_waiter_whose_loop_closed_goes_back_to_the_gate() -> None:
    """White-box: a call in line whose loop has closed (a server shutting down)
    can take no place; the one given back goes to the gate. The line is set up
    directly: no task is left pending on a loop that will never run again."""
    gate = AdmissionGate(threading.Semaphore(5), per_account=1)
    loop = asyncio.new_event_loop()
    assert gate.enter("alice")
    with gate._lock:
        assert gate._line_up_locked("alice", loop) is not None
    loop.close()
    gate.leave("alice")
    assert gate.occupied() == 0
    assert gate._waiting == {}


def test_a_place_goes_back_to_a_full_gate_not_to_the_waiting_call() -> None:
    """While the gate is full, calls of other accounts are being refused: the place
    an account gives back is theirs to take, and its own waiting call, past its
    share, is refused once its patience is over, as before there was a line."""
    gate = AdmissionGate(threading.Semaphore(3), per_account=1)

    async def scenario() -> tuple[bool, bool]:
        assert [gate.enter(name) for name in ("alice", "bob", "carol")] == [True] * 3
        waiting = asyncio.ensure_future(gate.enter_or_wait("alice", 0.3))
        await settle()
        gate.leave("alice")  # the gate was full: the place is the gate's again
        await settle()
        dave_got_it = gate.enter("dave")
        return dave_got_it, await waiting

    assert fresh_loop.run(scenario()) == (True, False)
    assert gate._waiting == {}
    assert gate.held_by("alice") == 0


# ---------------------------------------------------------------- waiting for room at a full gate


def test_a_call_at_a_full_gate_gets_the_next_place_given_back() -> None:
    """The place goes from the account that leaves to the one waiting for room:
    the gate never holds more than its places, and each account's count follows."""
    places = threading.Semaphore(2)
    gate = AdmissionGate(places, per_account=None, room_line=2)

    async def scenario() -> list[object]:
        assert [gate.enter("alice"), gate.enter("bob")] == [True, True]
        waiting = asyncio.ensure_future(gate.enter_or_wait("carol", PATIENCE, PATIENCE))
        await settle()
        seen: list[object] = [waiting.done(), gate.occupied()]
        # Given back by the assignment thread, as in the server.
        await asyncio.to_thread(gate.leave, "alice")
        seen += [await asyncio.wait_for(waiting, PATIENCE)]
        seen += [gate.held_by("alice"), gate.held_by("carol"), gate.occupied()]
        return seen

    assert fresh_loop.run(scenario()) == [False, 2, True, 0, 1, 2]
    assert not places.acquire(blocking=False)  # both places are still held
    assert gate._waiting_for_room == deque()


def test_a_call_waiting_for_room_is_refused_when_its_patience_runs_out() -> None:
    gate = AdmissionGate(threading.Semaphore(1), per_account=None, room_line=1)

    async def scenario() -> tuple[bool, float]:
        assert gate.enter("alice")
        started = time.monotonic()
        return await gate.enter_or_wait("bob", PATIENCE, 0.1), time.monotonic() - started

    granted, waited = fresh_loop.run(scenario())
    assert not granted
    assert 0.1 <= waited < PATIENCE
    assert gate._waiting_for_room == deque()
    gate.leave("alice")  # nobody waits any more: the place goes back to the gate
    assert gate.occupied() == 0
    assert gate.enter("bob")


def test_calls_beyond_the_line_for_room_are_refused_at_once() -> None:
    gate = AdmissionGate(threading.Semaphore(1), per_account=None, room_line=2)

    async def scenario() -> tuple[list[bool], float]:
        assert gate.enter("alice")
        calls = [asyncio.ensure_future(gate.enter_or_wait("bob", PATIENCE, 0.3)) for _ in range(4)]
        started = time.monotonic()
        refused_at_once = await asyncio.gather(*calls[2:])
        elapsed = time.monotonic() - started
        assert len(gate._waiting_for_room) == 2
        gate.leave("alice")
        gate.leave("bob")  # the first waiter's place, given back: the second's now
        served = await asyncio.gather(*calls[:2])
        return [*served, *refused_at_once], elapsed

    outcomes, elapsed = fresh_loop.run(scenario())
    assert outcomes == [True, True, False, False]
    assert elapsed < 0.3
    gate.leave("bob")
    assert gate.occupied() == 0


@pytest.mark.parametrize(
    ("room_line", "room_patience"),
    [(None, PATIENCE), (0, PATIENCE), (1, None)],
    ids=["no line by default", "no line", "no patience by default"],
)
def test_a_full_gate_refuses_at_once_without_a_line_or_patience_for_room(
    room_line: int | None, room_patience: float | None
) -> None:
    if room_line is None:  # the default
        gate = AdmissionGate(threading.Semaphore(1), per_account=None)
    else:
        gate = AdmissionGate(threading.Semaphore(1), per_account=None, room_line=room_line)

    async def scenario() -> tuple[bool, float]:
        assert gate.enter("alice")
        started = time.monotonic()
        if room_patience is None:  # the default
            granted = await gate.enter_or_wait("bob", PATIENCE)
        else:
            granted = await gate.enter_or_wait("bob", PATIENCE, room_patience)
        return granted, time.monotonic() - started

    granted, waited = fresh_loop.run(scenario())
    assert not granted
    assert waited < 1.0
    assert gate._waiting_for_room == deque()


def test_a_negative_line_for_room_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^room_line must not be negative$"):
        AdmissionGate(threading.Semaphore(5), per_account=None, room_line=-1)


def test_a_call_waiting_for_room_is_passed_over_while_its_account_holds_its_share() -> None:
    """Two of alice's calls wait for room; the first place given back by bob goes
    to the first, and alice then holds her share: the next place bob gives back
    goes to carol, behind her in line, and alice's second call is refused."""
    gate = AdmissionGate(threading.Semaphore(3), per_account=2, room_line=3)

    async def scenario() -> list[bool]:
        assert [gate.enter("alice"), gate.enter("bob"), gate.enter("bob")] == [True] * 3
        calls = [
            asyncio.ensure_future(gate.enter_or_wait(account, PATIENCE, 0.3))
            for account in ("alice", "alice", "carol")
        ]
        await settle()
        gate.leave("bob")
        gate.leave("bob")
        return list(await asyncio.gather(*calls))

    assert fresh_loop.run(scenario()) == [True, False, True]
    assert gate.held_by("alice") == 2
    assert gate.held_by("carol") == 1
    assert gate._waiting_for_room == deque()


def test_a_place_its_own_account_gives_back_reaches_its_call_waiting_for_room() -> None:
    """An account at its share with a call still waiting for room: a place it gives
    back may go to that call, since the account's count does not grow."""
    gate = AdmissionGate(threading.Semaphore(3), per_account=2, room_line=3)

    async def scenario() -> list[bool]:
        assert [gate.enter("alice"), gate.enter("bob"), gate.enter("bob")] == [True] * 3
        calls = [
            asyncio.ensure_future(gate.enter_or_wait("alice", PATIENCE, PATIENCE)) for _ in range(2)
        ]
        await settle()
        gate.leave("bob")  # to alice's first call: alice now holds her share
        await asyncio.wait_for(calls[0], PATIENCE)
        gate.leave("alice")  # to her second: she still holds two
        await asyncio.wait_for(calls[1], PATIENCE)
        return [call.result() for call in calls]

    assert fresh_loop.run(scenario()) == [True, True]
    assert gate.held_by("alice") == 2
    assert gate.held_by("bob") == 1
    for account in ("alice", "alice", "bob"):
        gate.leave(account)
    assert gate.occupied() == 0


def test_a_place_for_a_call_that_stopped_waiting_for_room_goes_on() -> None:
    """The hand-over is on its way when the caller goes: the place passes to the
    next call waiting for room, never lost."""
    gate = AdmissionGate(threading.Semaphore(1), per_account=None, room_line=2)

    async def scenario() -> bool:
        assert gate.enter("alice")
        first = asyncio.ensure_future(gate.enter_or_wait("bob", PATIENCE, PATIENCE))
        second = asyncio.ensure_future(gate.enter_or_wait("carol", PATIENCE, PATIENCE))
        await settle()
        gate.leave("alice")  # the hand-over to `first` is scheduled, not yet run
        first.cancel()
        return await asyncio.wait_for(second, PATIENCE)

    assert fresh_loop.run(scenario())
    assert gate.held_by("bob") == 0
    assert gate.held_by("carol") == 1
    gate.leave("carol")
    assert gate.occupied() == 0


@pytest.mark.parametrize(
    ("size", "room_patience"), [(5, 0.0), (3, 0.03)], ids=["for their share", "and for room"]
)
def test_waiting_calls_and_places_given_back_from_threads_lose_no_place(
    size: int, room_patience: float
) -> None:
    """Many calls of a flood and of others enter, wait (for their share, and for
    room at a full gate), time out, are cancelled and give places back from
    other threads: the gate never holds more than its places nor the flood more
    than its share, and when all is over every place is back in the gate."""
    share = 2
    places = threading.Semaphore(size)
    gate = AdmissionGate(places, per_account=share, room_line=size)
    most = {"flood": 0, "total": 0}

    async def call(account: str, index: int) -> None:
        if not await gate.enter_or_wait(account, 0.05, room_patience):
            return
        most["flood"] = max(most["flood"], gate.held_by("flood"))
        most["total"] = max(most["total"], gate.occupied())

        def decide_and_leave() -> None:  # as the assignment thread does
            time.sleep(0.001 * (index % 3))
            gate.leave(account)

        # A call cancelled while its place is used still gives it back: the
        # assignment thread's queue is not the call's. Shielded, because asyncio
        # drops an executor item of a cancelled call that no thread started yet.
        await asyncio.shield(asyncio.to_thread(decide_and_leave))

    async def scenario() -> None:
        calls = [
            asyncio.ensure_future(call("flood" if n % 3 else f"other{n % 4}", n))
            for n in range(400)
        ]
        await asyncio.sleep(0.02)
        for doomed in calls[::5]:
            doomed.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await asyncio.to_thread(wait_until, lambda: gate.occupied() == 0)
        await settle()

    fresh_loop.run(scenario())
    assert most["flood"] <= share
    assert most["total"] <= size
    assert gate.occupied() == 0
    assert gate._waiting == {}
    assert gate._waiting_for_room == deque()
    assert [places.acquire(blocking=False) for _ in range(size + 1)] == [True] * size + [False]


def test_a_place_on_its_way_is_not_taken_back_when_the_patience_runs_out() -> None:
    """White-box: the timer fires after a place was handed over but before the
    hand-over ran on the loop: the call gets the place, not a refusal."""
    gate = AdmissionGate(threading.Semaphore(1), per_account=None, room_line=1)

    async def scenario() -> bool:
        assert gate.enter("alice")
        waiting = asyncio.ensure_future(gate.enter_or_wait("bob", PATIENCE, PATIENCE))
        await settle()
        ((_, waiter),) = gate._waiting_for_room
        gate.leave("alice")  # the hand-over is scheduled, not yet run
        gate._give_up("bob", waiter)  # as the patience's timer would, meanwhile
        return await asyncio.wait_for(waiting, PATIENCE)

    assert fresh_loop.run(scenario())
    assert gate.held_by("bob") == 1


def refusals() -> dict[str, float]:
    """The "too busy" counter's values by reason."""
    return {
        sample.labels["reason"]: sample.value
        for metric in TOO_BUSY.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    }


def test_refusals_are_counted_by_reason_and_places_given_are_not() -> None:
    gate = AdmissionGate(threading.Semaphore(2), per_account=1, room_line=1)
    counted: list[tuple[bool, dict[str, float]]] = []
    last = refusals()

    def count(outcome: bool) -> None:
        nonlocal last
        now = refusals()
        counted.append((outcome, {reason: now[reason] - last.get(reason, 0) for reason in now}))
        last = now

    async def scenario() -> None:
        count(gate.enter("alice"))
        count(gate.enter("alice"))  # past its share
        count(gate.enter("bob"))
        count(gate.enter("carol"))  # a full gate
        count(await gate.enter_or_wait("carol", 0.05, 0.05))  # no room came
        count(await gate.enter_or_wait("alice", 0.05, 0.05))  # its share is held
        waiting = asyncio.ensure_future(gate.enter_or_wait("carol", 0.05, PATIENCE))
        await settle()
        gate.leave("bob")
        count(await asyncio.wait_for(waiting, PATIENCE))  # room came

    fresh_loop.run(scenario())
    none = {"gate_full": 0, "account_share": 0}
    full = {"gate_full": 1, "account_share": 0}
    share = {"gate_full": 0, "account_share": 1}
    assert counted == [
        (True, none),
        (False, share),
        (True, none),
        (False, full),
        (False, full),
        (False, share),
        (True, none),
    ]
