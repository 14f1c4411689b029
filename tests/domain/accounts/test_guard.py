"""Accounts behind the password guard, on real storage (both backends): throttled
logins, worker passwords, token creation and password changes; signups per
address; argon2 bounded and paid alike by unknown names and wrong passwords."""

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from argon2 import PasswordHasher

from arbiter.domain.accounts import Accounts, User
from arbiter.domain.errors import (
    InvalidCredentials,
    PasswordChecksBusy,
    TooManyAttempts,
    ValidationError,
)
from arbiter.domain.password_guard import PasswordGuard, PasswordLimits
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from tests.domain.support import NEW_PASSWORD, OTHER_PASSWORD, PASSWORD, Clock

HERE, THERE = "192.0.2.1", "198.51.100.9"
LIMITS = PasswordLimits(
    account_free_failures=2,
    address_free_failures=4,
    max_delay_seconds=60.0,
    forget_seconds=600.0,
    argon2_concurrency=2,
    argon2_waiting=50,
    argon2_wait_seconds=30.0,
    signups_per_address_per_hour=2,
)


class CountingHasher(PasswordHasher):
    """argon2id at its lowest cost that counts its calls, and the most that ran at
    once; `pause` makes each verification last at least that long."""

    def __init__(self, pause: float = 0.0) -> None:
        super().__init__(time_cost=1, memory_cost=8, parallelism=1)
        self.pause = pause
        self.verifies = 0
        self.hashes = 0
        self.most_at_once = 0
        self._running = 0
        self._lock = threading.Lock()

    def hash(self, password: str | bytes, *, salt: bytes | None = None) -> str:
        with self._counted():
            self.hashes += 1
            return super().hash(password, salt=salt)

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        with self._counted():
            self.verifies += 1
            time.sleep(self.pause)
            return super().verify(hash, password)

    def calls(self) -> tuple[int, int]:
        return self.verifies, self.hashes

    @contextmanager
    def _counted(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
            self.most_at_once = max(self.most_at_once, self._running)
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1


@pytest.fixture
def hasher() -> CountingHasher:
    return CountingHasher()


@pytest.fixture
def guard(clock: Clock) -> PasswordGuard:
    return PasswordGuard(LIMITS, clock)


@pytest.fixture
def guarded(
    storage: Storage, clock: Clock, hasher: CountingHasher, guard: PasswordGuard
) -> Accounts:
    return Accounts(storage, hasher=hasher, clock=clock, guard=guard)


@pytest.fixture
def alice(guarded: Accounts) -> User:
    return guarded.create_user("alice", PASSWORD, email="alice@example.org")


def fail_login(accounts: Accounts, name: str, times: int, address: str = HERE) -> None:
    for _ in range(times):
        with pytest.raises(InvalidCredentials):
            accounts.authenticate(name, OTHER_PASSWORD, address=address)


def system_events(storage: Storage) -> list[str]:
    """The system_event messages, oldest first."""
    with storage.read() as tx:
        found = tx.actions.query(ActionFilter(action="system_event"))
    return [action.message for action in reversed(found)]


# --- the same cost for unknown names and wrong passwords ---


@pytest.mark.parametrize("login", ["form", "worker"])
def test_unknown_name_and_wrong_password_call_argon2_alike(
    guarded: Accounts, hasher: CountingHasher, alice: User, login: str
) -> None:
    def check(name: str) -> None:
        if login == "form":
            guarded.authenticate(name, OTHER_PASSWORD, address=HERE)
        else:
            guarded.authenticate_worker(name, OTHER_PASSWORD, HERE)

    def attempt(name: str) -> tuple[int, int]:
        before = hasher.calls()
        with pytest.raises(InvalidCredentials):
            check(name)
        after = hasher.calls()
        return after[0] - before[0], after[1] - before[1]

    assert attempt("alice") == attempt("nobody") == (1, 0)


# --- logins ---


def test_an_account_waits_after_its_free_failures_then_may_try_again(
    guarded: Accounts, hasher: CountingHasher, clock: Clock, alice: User
) -> None:
    fail_login(guarded, "alice", 3)  # two free, the third starts a 1 s wait
    verified = hasher.verifies
    with pytest.raises(TooManyAttempts) as refused:
        guarded.authenticate("alice", PASSWORD, address=HERE)  # even the right one
    assert refused.value.retry_after == 1.0
    assert str(refused.value) == "Too many failed attempts. Try again in 1 s."
    assert hasher.verifies == verified  # refused before argon2
    clock.advance(1.0)
    fail_login(guarded, "ALICE", 1)  # the wait doubles
    with pytest.raises(TooManyAttempts) as refused:
        guarded.authenticate("alice", PASSWORD, address=HERE)
    assert refused.value.retry_after == 2.0
    assert guarded.authenticate("alice", PASSWORD, address=THERE) == alice  # the owner
    clock.advance(2.0)
    assert guarded.authenticate("alice", PASSWORD, address=HERE) == alice


def test_an_owner_gets_in_every_time_while_someone_guesses_each_second(
    guarded: Accounts, clock: Clock, alice: User
) -> None:
    refused = 0
    for _ in range(30):
        try:
            guarded.authenticate("alice", OTHER_PASSWORD, address=HERE)
        except TooManyAttempts:
            refused += 1
        except InvalidCredentials:
            pass
        assert guarded.authenticate("alice", PASSWORD, address=THERE) == alice
        assert guarded.authenticate_worker("alice", PASSWORD, THERE) == alice
        clock.advance(1.0)
    assert refused > 20  # the guesser still waits


def test_a_success_starts_the_account_over(guarded: Accounts, clock: Clock, alice: User) -> None:
    fail_login(guarded, "alice", 2, THERE)
    guarded.authenticate("alice", PASSWORD, address=THERE)
    fail_login(guarded, "alice", 2, THERE)
    assert guarded.authenticate("alice", PASSWORD, address=THERE) == alice


def test_failures_are_forgotten_after_a_quiet_spell(
    guarded: Accounts, clock: Clock, alice: User
) -> None:
    for _ in range(6):
        fail_login(guarded, "alice", 1)
        clock.advance(10)  # each wait is over: 1, 2, 4, 8 s
    clock.advance(LIMITS.forget_seconds)
    fail_login(guarded, "alice", 2, THERE)  # free again
    assert guarded.authenticate("alice", PASSWORD, address=THERE) == alice


def test_unknown_names_are_throttled_like_accounts(guarded: Accounts, alice: User) -> None:
    fail_login(guarded, "nobody", 3)
    with pytest.raises(TooManyAttempts):
        guarded.authenticate("nobody", PASSWORD, address=HERE)


def test_an_address_waits_after_failing_on_many_names(guarded: Accounts, alice: User) -> None:
    for name in ("n1", "n2", "n3", "n4", "n5"):
        fail_login(guarded, name, 1)
    with pytest.raises(TooManyAttempts):
        guarded.authenticate("alice", PASSWORD, address=HERE)
    assert guarded.authenticate("alice", PASSWORD, address=THERE) == alice


# Each way a password is guessed; an empty address is left out of the call, so
# the default is what is tested then.


def at(address: str) -> dict[str, str]:
    return {"address": address} if address else {}


def guess_login(accounts: Accounts, name: str, password: str, address: str) -> None:
    accounts.authenticate(name, password, **at(address))


def guess_worker(accounts: Accounts, name: str, password: str, address: str) -> None:
    accounts.authenticate_worker(name, password, **at(address))


def guess_token(accounts: Accounts, name: str, password: str, address: str) -> None:
    accounts.create_own_token(name, password, **at(address))


def guess_change(accounts: Accounts, name: str, password: str, address: str) -> None:
    accounts.change_password(name, password, NEW_PASSWORD, **at(address))


Guess = Callable[[Accounts, str, str, str], None]


@pytest.mark.parametrize("guess", [guess_login, guess_worker, guess_token, guess_change])
def test_every_kind_of_guess_counts_against_its_address(guarded: Accounts, guess: Guess) -> None:
    """One wrong password on each of five accounts from one address: the address
    then waits, whichever way the guesses came (its own accounts too)."""
    for n in range(LIMITS.address_free_failures + 1):
        guarded.create_user(f"user{n}", PASSWORD)
        with pytest.raises((InvalidCredentials, ValidationError)):
            guess(guarded, f"user{n}", OTHER_PASSWORD, HERE)
    guarded.create_user("fresh", PASSWORD)
    with pytest.raises(TooManyAttempts):
        guess(guarded, "fresh", PASSWORD, HERE)
    guess(guarded, "fresh", PASSWORD, THERE)


@pytest.mark.parametrize("guess", [guess_login, guess_worker, guess_token, guess_change])
def test_guesses_without_an_address_count_against_no_address(
    guarded: Accounts, guess: Guess
) -> None:
    """The same five wrong passwords with no address given: none counts against a
    shared one."""
    for n in range(LIMITS.address_free_failures + 1):
        guarded.create_user(f"user{n}", PASSWORD)
        with pytest.raises((InvalidCredentials, ValidationError)):
            guess(guarded, f"user{n}", OTHER_PASSWORD, "")
    guarded.create_user("fresh", PASSWORD)
    guess(guarded, "fresh", PASSWORD, "")


def test_an_address_wait_is_in_the_server_log_with_the_address(
    guarded: Accounts, alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="arbiter.accounts"):
        for name in ("n1", "n2", "n3", "n4", "n5"):
            fail_login(guarded, name, 1)
    assert [record.getMessage() for record in caplog.records] == [
        f"password attempts from {HERE} throttled for 1 s after 5 failures"
    ]


def test_each_wait_that_begins_is_audited_without_the_address(
    guarded: Accounts, storage: Storage, alice: User
) -> None:
    fail_login(guarded, "alice", 3)
    fail_login(guarded, "nobody", 3, THERE)
    assert system_events(storage) == [
        "password attempts throttled: account alice, 3 failures, next attempt in 1 s",
        "password attempts throttled: an unknown account, 3 failures, next attempt in 1 s",
    ]
    for name in ("n1", "n2"):
        fail_login(guarded, name, 1)
    assert system_events(storage)[-1] == (
        "password attempts throttled: a client address, 5 failures, next attempt in 1 s"
    )
    assert not any(HERE in message for message in system_events(storage))


def test_a_busy_gate_refuses_at_once_and_counts_no_failure(
    storage: Storage, clock: Clock, hasher: CountingHasher, alice: User
) -> None:
    guard = PasswordGuard(
        PasswordLimits(argon2_concurrency=1, argon2_waiting=0, account_free_failures=0), clock
    )
    accounts = Accounts(storage, hasher=hasher, clock=clock, guard=guard)
    with guard.gate.slot():
        with pytest.raises(PasswordChecksBusy) as busy:
            accounts.authenticate("alice", OTHER_PASSWORD, address=HERE)
        assert busy.value.retry_after == 1.0
    # Not a failure: with no free failure at all, a counted one would make it wait.
    assert accounts.authenticate("alice", PASSWORD, address=HERE) == alice


def test_the_gate_bounds_argon2_calls_at_once(storage: Storage, clock: Clock, alice: User) -> None:
    slow = CountingHasher(pause=0.05)
    accounts = Accounts(storage, hasher=slow, clock=clock, guard=PasswordGuard(LIMITS, clock))
    results: list[Any] = []

    def log_in() -> None:
        results.append(accounts.authenticate("alice", PASSWORD, address=HERE))

    threads = [threading.Thread(target=log_in) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [alice] * 8
    assert slow.most_at_once <= LIMITS.argon2_concurrency


# --- worker passwords and tokens ---


def test_worker_passwords_are_throttled_like_logins(guarded: Accounts, alice: User) -> None:
    for _ in range(3):
        with pytest.raises(InvalidCredentials):
            guarded.authenticate_worker("alice", OTHER_PASSWORD, HERE)
    with pytest.raises(TooManyAttempts):
        guarded.authenticate_worker("Alice", PASSWORD, HERE)
    with pytest.raises(TooManyAttempts):
        guarded.authenticate("alice", PASSWORD, address=HERE)
    assert guarded.authenticate_worker("alice", PASSWORD, THERE) == alice  # the owner's


def test_worker_tokens_and_proven_passwords_are_not_throttled(
    guarded: Accounts, hasher: CountingHasher, alice: User
) -> None:
    token = guarded.create_token("alice", "box")
    guarded.authenticate_worker("alice", PASSWORD, THERE)  # proven once
    fail_login(guarded, "alice", 3)
    verified = hasher.verifies
    assert guarded.authenticate_worker("alice", token, HERE) == alice
    assert guarded.authenticate_worker("alice", PASSWORD, HERE) == alice
    assert hasher.verifies == verified


# --- signups ---


def test_signups_are_limited_per_address(guarded: Accounts, storage: Storage, clock: Clock) -> None:
    guarded.signup("carol", PASSWORD, "carol@example.org", address=HERE)
    guarded.signup("dave", PASSWORD, "dave@example.org", address=HERE)
    with pytest.raises(TooManyAttempts) as refused:
        guarded.signup("erin", PASSWORD, "erin@example.org", address=HERE)
    assert str(refused.value) == "Too many signups from your address. Try again in 3600 s."
    assert guarded.get_user("erin") is None
    guarded.signup("frank", PASSWORD, "frank@example.org", address=THERE)
    clock.advance(3600)
    guarded.signup("erin", PASSWORD, "erin@example.org", address=HERE)


def test_signups_without_an_address_are_not_counted(guarded: Accounts) -> None:
    for n in range(LIMITS.signups_per_address_per_hour + 1):
        guarded.signup(f"user{n}", PASSWORD, f"user{n}@example.org")
        guarded.create_user(f"made{n}", PASSWORD)  # operators' accounts never are


def test_a_signup_with_a_bad_field_uses_no_place(guarded: Accounts) -> None:
    for _ in range(5):
        with pytest.raises(ValidationError):
            guarded.signup("x", PASSWORD, "carol@example.org", address=HERE)
    guarded.signup("carol", PASSWORD, "carol@example.org", address=HERE)


# --- making a token and changing the password ---


def test_a_token_needs_the_current_password(guarded: Accounts, alice: User) -> None:
    with pytest.raises(ValidationError) as wrong:
        guarded.create_own_token("alice", OTHER_PASSWORD, "box", address=HERE)
    assert (wrong.value.field, str(wrong.value)) == (
        "current_password",
        "The current password is wrong.",
    )
    assert guarded.list_tokens("alice") == []
    token = guarded.create_own_token("alice", PASSWORD, "box", address=HERE)
    assert guarded.authenticate_worker("alice", token) == alice


def test_guessing_the_password_to_make_a_token_is_throttled(guarded: Accounts, alice: User) -> None:
    for _ in range(3):
        with pytest.raises(ValidationError):
            guarded.create_own_token("alice", OTHER_PASSWORD, address=HERE)
    with pytest.raises(TooManyAttempts):
        guarded.create_own_token("alice", PASSWORD, address=HERE)
    assert guarded.list_tokens("alice") == []


def test_a_password_change_can_revoke_every_token(guarded: Accounts, alice: User) -> None:
    tokens = [guarded.create_token("alice", label) for label in ("a", "b")]
    guarded.authenticate_worker("alice", tokens[0])  # proven: in memory too
    guarded.change_password("alice", PASSWORD, NEW_PASSWORD, revoke_tokens=True)
    assert all(info.revoked for info in guarded.list_tokens("alice"))
    for token in tokens:
        with pytest.raises(InvalidCredentials):
            guarded.authenticate_worker("alice", token)


def test_a_password_change_keeps_tokens_unless_asked(guarded: Accounts, alice: User) -> None:
    token = guarded.create_token("alice")
    guarded.change_password("alice", PASSWORD, NEW_PASSWORD)
    assert not guarded.list_tokens("alice")[0].revoked
    assert guarded.authenticate_worker("alice", token) == alice


def test_a_wrong_old_password_is_a_throttled_guess(
    guarded: Accounts, clock: Clock, alice: User
) -> None:
    for _ in range(3):
        with pytest.raises(ValidationError):
            guarded.change_password(
                "alice", OTHER_PASSWORD, NEW_PASSWORD, revoke_tokens=True, address=HERE
            )
    with pytest.raises(TooManyAttempts):
        guarded.change_password("alice", PASSWORD, NEW_PASSWORD, address=HERE)
    clock.advance(1.0)
    assert guarded.authenticate("alice", PASSWORD, address=THERE) == alice  # unchanged
