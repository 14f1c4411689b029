"""Growing delays per key and sliding-window rates, on a clock the tests move."""

import pytest

from arbiter.domain.throttle import (
    FailurePolicy,
    FailureThrottle,
    RateWindow,
    account_key,
    address_key,
)
from tests.domain.support import Clock

POLICY = FailurePolicy(free_failures=3, max_delay=60.0, forget_after=600.0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_failures_are_free_then_delays_double_up_to_the_ceiling(clock: Clock) -> None:
    throttle = FailureThrottle(POLICY, clock)
    delays = [throttle.failed("k")[1] for _ in range(12)]
    assert delays == [0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert throttle.failed("k")[0] == 13


def test_retry_after_counts_down_to_zero(clock: Clock) -> None:
    throttle = FailureThrottle(POLICY, clock)
    for _ in range(5):
        throttle.failed("k")  # the fifth imposes 2 s
    assert throttle.retry_after("k") == 2.0
    clock.advance(1.5)
    assert throttle.retry_after("k") == 0.5
    clock.advance(0.5)
    assert throttle.retry_after("k") == 0.0
    assert throttle.retry_after("other") == 0.0


def test_success_starts_the_key_over(clock: Clock) -> None:
    throttle = FailureThrottle(POLICY, clock)
    for _ in range(5):
        throttle.failed("k")
    throttle.succeeded("k")
    assert throttle.retry_after("k") == 0.0
    assert throttle.failed("k") == (1, 0.0)


def test_a_key_quiet_for_long_enough_is_forgotten(clock: Clock) -> None:
    throttle = FailureThrottle(POLICY, clock)
    for _ in range(5):
        throttle.failed("k")
    clock.advance(POLICY.forget_after + 1)
    assert throttle.retry_after("k") == 0.0
    assert len(throttle) == 0
    assert throttle.failed("k") == (1, 0.0)


def test_a_key_failing_again_within_the_spell_is_remembered(clock: Clock) -> None:
    throttle = FailureThrottle(POLICY, clock)
    for _ in range(4):
        clock.advance(POLICY.forget_after - 1)
        throttle.failed("k")
    assert throttle.failed("k") == (5, 2.0)


def test_memory_is_bounded_by_dropping_the_least_recent_key(clock: Clock) -> None:
    throttle = FailureThrottle(POLICY, clock, capacity=100)
    for index in range(1000):
        throttle.failed(f"k{index}")
    assert len(throttle) == 100
    assert throttle.failed("k999")[0] == 2  # kept
    assert throttle.failed("k0")[0] == 1  # dropped, starts over


def test_a_delay_never_overflows(clock: Clock) -> None:
    throttle = FailureThrottle(FailurePolicy(0, 1e300, 1e300), clock)
    for _ in range(5000):
        _, delay = throttle.failed("k")
    assert delay == 2.0**64


def test_account_keys_ignore_case_and_are_cut() -> None:
    assert account_key("Alice") == account_key("ALICE") == account_key("alice")
    assert len(account_key("x" * 10_000)) < 100


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9"),  # one /64: one client
        ("::ffff:192.0.2.7", "192.0.2.7"),
    ],
)
def test_address_keys_that_are_one_client(first: str, second: str) -> None:
    assert address_key(first) == address_key(second)


def test_address_keys_that_are_different_clients() -> None:
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key("192.0.2.7") != address_key("192.0.2.8")
    assert len(address_key("testclient" * 1000)) < 100


def test_rate_window_allows_its_limit_then_says_how_long_to_wait(clock: Clock) -> None:
    window = RateWindow(3, 3600.0, clock)
    for _ in range(3):
        assert window.take("a") == 0.0
        clock.advance(10)
    assert window.take("a") == 3600.0 - 30
    assert window.take("b") == 0.0  # another key has its own room
    clock.advance(3600.0 - 30)
    assert window.take("a") == 0.0  # the first event left the window
    assert window.take("a") > 0


def test_rate_window_refusals_are_not_counted(clock: Clock) -> None:
    window = RateWindow(1, 100.0, clock)
    window.take("a")
    for _ in range(10):
        clock.advance(5)
        window.take("a")
    clock.advance(50)
    assert window.take("a") == 0.0


def test_rate_window_memory_is_bounded(clock: Clock) -> None:
    window = RateWindow(1, 100.0, clock, capacity=10)
    for index in range(100):
        window.take(f"k{index}")
    assert window.take("k0") == 0.0  # forgotten
    assert window.take("k99") > 0
