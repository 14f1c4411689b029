"""The argon2 gate and the guard's throttles (memory only, no storage)."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from arbiter.domain.errors import PasswordChecksBusy, TooManyAttempts
from arbiter.domain.password_guard import HashingGate, PasswordGuard, PasswordLimits
from tests.domain.support import Clock

LIMITS = PasswordLimits(
    account_free_failures=2,
    address_free_failures=4,
    max_delay_seconds=60.0,
    forget_seconds=600.0,
    signups_per_address_per_hour=2,
)


@contextmanager
def holders(gate: HashingGate, count: int) -> Iterator[None]:
    """`count` threads inside the gate until the block ends."""
    inside = threading.Semaphore(0)
    leave = threading.Event()

    def hold() -> None:
        with gate.slot():
            inside.release()
            leave.wait()

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for thread in threads:
        thread.start()
    for _ in range(count):
        assert inside.acquire(timeout=10)
    try:
        yield
    finally:
        leave.set()
        for thread in threads:
            thread.join()


def test_a_caller_waits_for_a_slot_and_gets_it_when_one_frees() -> None:
    gate = HashingGate(concurrency=1, waiting=1, wait_seconds=30.0)
    release = threading.Event()
    entered = threading.Event()

    def hold() -> None:
        with gate.slot():
            entered.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(10)
    threading.Timer(0.05, release.set).start()
    with gate.slot():  # waits for the holder, well within 30 s
        pass
    holder.join()


def test_a_caller_that_waits_too_long_is_turned_away() -> None:
    gate = HashingGate(concurrency=1, waiting=1, wait_seconds=0.05)
    with holders(gate, 1), pytest.raises(PasswordChecksBusy), gate.slot():
        pass


def test_beyond_the_waiting_room_callers_are_turned_away_without_waiting() -> None:
    # A 30 s wait would stall this test if the refused caller waited at all.
    gate = HashingGate(concurrency=2, waiting=0, wait_seconds=30.0)
    with holders(gate, 2), pytest.raises(PasswordChecksBusy), gate.slot():
        pass
    with gate.slot():  # the slots came back
        pass


def test_a_refused_caller_gives_back_its_place_in_the_waiting_room() -> None:
    gate = HashingGate(concurrency=1, waiting=1, wait_seconds=0.01)
    with holders(gate, 1):
        for _ in range(5):
            with pytest.raises(PasswordChecksBusy), gate.slot():
                pass
    with gate.slot():
        pass


def test_the_gate_says_it_is_full_only_when_a_caller_would_be_turned_away() -> None:
    gate = HashingGate(concurrency=1, waiting=1, wait_seconds=30.0)
    assert not gate.full()
    with holders(gate, 1):
        assert not gate.full()  # one may still wait
    busy = HashingGate(concurrency=1, waiting=0, wait_seconds=30.0)
    with holders(busy, 1):
        assert busy.full()
    assert not busy.full()


def test_refuse_early_raises_what_the_guess_would_meet_before_argon2() -> None:
    clock = Clock()
    guard = PasswordGuard(
        PasswordLimits(account_free_failures=0, argon2_concurrency=1, argon2_waiting=0), clock
    )
    guard.refuse_early("alice", "192.0.2.1")  # nothing stands in the way
    with holders(guard.gate, 1), pytest.raises(PasswordChecksBusy):
        guard.refuse_early("alice", "192.0.2.1")
    guard.failed("alice", "192.0.2.1")
    with pytest.raises(TooManyAttempts):
        guard.refuse_early("ALICE", "192.0.2.1")  # the account waits, from that address
    guard.refuse_early("alice", "192.0.2.7")  # not from another one
    guard.refuse_early("bob", "192.0.2.1")


def test_the_account_waits_after_its_free_failures() -> None:
    clock = Clock()
    guard = PasswordGuard(LIMITS, clock)
    assert guard.failed("alice", "192.0.2.3") == []
    assert guard.failed("alice", "192.0.2.3") == []
    [throttled] = guard.failed("Alice", "192.0.2.3")
    assert (throttled.scope, throttled.failures, throttled.delay) == ("account", 3, 1.0)
    with pytest.raises(TooManyAttempts) as refused:
        guard.check("ALICE", "192.0.2.3")  # any spelling
    assert refused.value.retry_after == 1.0
    guard.check("alice", "192.0.2.4")  # guesses from one address never hold another back
    guard.check("bob", "192.0.2.3")
    clock.advance(1.0)
    guard.check("alice", "192.0.2.3")


def test_guesses_from_many_addresses_never_lock_the_owner_out() -> None:
    guard = PasswordGuard(LIMITS, Clock())
    for guesser in range(50):
        guard.failed("alice", f"198.51.100.{guesser}")
    guard.check("alice", "192.0.2.1")


def test_the_address_waits_after_its_free_failures_whatever_the_names() -> None:
    guard = PasswordGuard(LIMITS, Clock())
    for name in ("a1", "a2", "a3", "a4"):
        assert guard.failed(name, "192.0.2.1") == []
    [throttled] = guard.failed("a5", "192.0.2.1")
    assert (throttled.scope, throttled.key, throttled.delay) == ("address", "192.0.2.1", 1.0)
    with pytest.raises(TooManyAttempts):
        guard.check("someone", "192.0.2.1")
    guard.check("someone", "192.0.2.2")


def test_success_clears_the_account_but_not_the_address() -> None:
    guard = PasswordGuard(LIMITS, Clock())
    for _ in range(5):
        guard.failed("alice", "192.0.2.1")
    guard.succeeded("alice", "192.0.2.1")
    guard.check("alice", "192.0.2.2")
    with pytest.raises(TooManyAttempts):
        guard.check("alice", "192.0.2.1")  # the address still waits


def test_signups_are_limited_per_address_per_hour() -> None:
    clock = Clock()
    guard = PasswordGuard(LIMITS, clock)
    guard.take_signup("192.0.2.1")
    guard.take_signup("192.0.2.1")
    with pytest.raises(TooManyAttempts) as refused:
        guard.take_signup("192.0.2.1")
    assert str(refused.value) == "Too many signups from your address. Try again in 3600 s."
    guard.take_signup("192.0.2.2")
    clock.advance(3600)
    guard.take_signup("192.0.2.1")
