"""Webhooks and follows through real storage and a real HTTP receiver on
loopback: events from the outbox, who gets them, the signature, the formats,
retries with backoff, and the delivery log."""

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
from sqlalchemy import Engine

from arbiter.domain import webhooks
from arbiter.domain.accounts import User
from arbiter.domain.errors import PermissionDenied, ValidationError
from arbiter.domain.follows import Follows
from arbiter.domain.quarantine import MachineHealth
from arbiter.domain.runs.service import Runs
from arbiter.domain.url_policy import Destination
from arbiter.domain.webhooks import MAX_ATTEMPTS, Webhooks, retry_delay
from arbiter.storage import Storage
from tests.domain.runs.support import Clock, make_user, submit
from tests.domain.test_quarantine import BAD, NOW
from tests.domain.test_quarantine import RUNS as QUARANTINE_RUNS
from tests.domain.test_quarantine import seed as seed_quarantine
from tests.domain.webhook_receiver import Receiver, dripping_receiver, receiver


@pytest.fixture(autouse=True)
def delivery_log(caplog: pytest.LogCaptureFixture) -> None:
    """Each failed attempt's reason (logged at info), shown with a failing test:
    the lanes tests have failed rarely under a loaded suite, and this says why."""
    caplog.set_level(logging.INFO, logger="arbiter.webhooks")


@pytest.fixture
def storage(engine: Engine) -> Storage:
    return Storage(engine)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def runs(storage: Storage, clock: Clock) -> Runs:
    return Runs(storage, task_gate=threading.Semaphore(5), clock=clock)


@pytest.fixture
def hooks(storage: Storage, clock: Clock) -> Webhooks:
    return Webhooks(storage, base_url="https://arbiter.test", allow_private=True, clock=clock)


@pytest.fixture
def sink() -> Iterator[Receiver]:
    with receiver() as found:
        yield found


@pytest.fixture
def people(storage: Storage) -> tuple[User, User, User]:
    return (
        make_user(storage, "root", approver=True),
        make_user(storage, "alice"),
        make_user(storage, "bob"),
    )


def test_the_owner_hook_gets_a_signed_event_when_a_run_is_approved_and_stopped(
    runs: Runs, hooks: Webhooks, sink: Receiver, people: tuple[User, User, User], repo_url: str
) -> None:
    root, alice, _ = people
    hook = hooks.register(alice, sink.url, ["approved", "stopped"], "json")
    run_id = submit(runs, alice, repo_url, info="Hooked")
    runs.lifecycle.approve(root, run_id)
    runs.lifecycle.stop(root, run_id)
    assert hooks.run() == 2
    assert [json.loads(r.body)["event"] for r in sink.requests] == ["approved", "stopped"]
    first = sink.requests[0]
    expected = "sha256=" + hmac.new(hook.secret.encode(), first.body, hashlib.sha256).hexdigest()
    assert first.headers["X-Arbiter-Signature"] == expected
    assert first.headers["X-Arbiter-Event"] == "approved"
    document = json.loads(first.body)
    assert document["run"]["url"] == f"https://arbiter.test/tests/view/{run_id}"
    assert document["run"]["username"] == "alice"
    (view,) = hooks.of_user("alice")
    assert [d.status for d in view.deliveries] == ["delivered", "delivered"]
    assert hooks.run() == 0  # each event is sent once


def test_followers_and_approvers_hooks_for_every_run_get_events_others_do_not(
    runs: Runs,
    hooks: Webhooks,
    storage: Storage,
    sink: Receiver,
    people: tuple[User, User, User],
    repo_url: str,
) -> None:
    root, alice, bob = people
    run_id = submit(runs, alice, repo_url)
    hooks.register(bob, sink.url + "/bob", ["approved"], "discord")
    hooks.register(root, sink.url + "/all", ["approved"], "slack", all_runs=True)
    carol = make_user(storage, "carol")
    hooks.register(carol, sink.url + "/carol", ["approved"], "json")
    Follows(storage).change("bob", run_id, follow=True)
    runs.lifecycle.approve(root, run_id)
    hooks.run()
    by_path = {r.path: json.loads(r.body) for r in sink.requests}
    assert set(by_path) == {"/hook/bob", "/hook/all"}
    assert by_path["/hook/bob"]["content"].startswith("Test patch vs master by alice approved")
    assert "text" in by_path["/hook/all"]
    with pytest.raises(PermissionDenied):
        hooks.register(bob, sink.url, ["approved"], "json", all_runs=True)


def test_a_failed_delivery_is_retried_with_growing_waits_then_given_up(
    runs: Runs,
    hooks: Webhooks,
    clock: Clock,
    sink: Receiver,
    people: tuple[User, User, User],
    repo_url: str,
) -> None:
    root, alice, _ = people
    hooks.register(alice, sink.url, ["approved"], "json")
    runs.lifecycle.approve(root, submit(runs, alice, repo_url))
    sink.replies = [500, 503]
    assert hooks.run() == 0
    assert hooks.run() == 0  # not due yet: nothing sent
    assert len(sink.requests) == 1
    clock.advance(retry_delay(1))
    assert hooks.run() == 0  # the 503
    clock.advance(retry_delay(2) - 1)
    assert hooks.run() == 0
    assert len(sink.requests) == 2
    clock.advance(1)
    assert hooks.run() == 1
    assert len({r.body for r in sink.requests}) == 1  # the same body each time
    (view,) = hooks.of_user("alice")
    (delivery,) = view.deliveries
    assert (delivery.status, delivery.attempts, delivery.last_code) == ("delivered", 3, 200)
    assert [retry_delay(n) for n in (1, 2, 3, 20)] == [30, 60, 120, 3600]

    sink.replies = [500] * MAX_ATTEMPTS
    runs.lifecycle.stop(root, view.deliveries[0].run_id)
    hooks.register(alice, sink.url + "/stops", ["stopped"], "json")
    for _ in range(MAX_ATTEMPTS):
        hooks.run()
        clock.advance(3600)
    hooks.run()
    stops = next(v for v in hooks.of_user("alice") if v.hook.url.endswith("/stops"))
    assert (stops.deliveries[0].status, stops.deliveries[0].attempts) == ("failed", MAX_ATTEMPTS)


def test_an_unreachable_receiver_is_an_error_in_the_log_not_a_crash(
    runs: Runs, hooks: Webhooks, people: tuple[User, User, User], repo_url: str
) -> None:
    root, alice, _ = people
    with receiver() as gone:
        url = gone.url
    hooks.register(alice, url, ["approved"], "json")
    runs.lifecycle.approve(root, submit(runs, alice, repo_url))
    assert hooks.run() == 0
    (view,) = hooks.of_user("alice")
    assert view.deliveries[0].status == "pending"
    assert "Connect" in view.deliveries[0].last_error


def test_private_addresses_are_refused_unless_allowed(
    storage: Storage, runs: Runs, clock: Clock, people: tuple[User, User, User], repo_url: str
) -> None:
    root, alice, _ = people
    strict = Webhooks(storage, clock=clock)
    with receiver() as sink:
        strict.register(alice, sink.url, ["approved"], "json")
        runs.lifecycle.approve(root, submit(runs, alice, repo_url))
        assert strict.run() == 0
        assert sink.requests == []
    (view,) = strict.of_user("alice")
    assert "may not reach" in view.deliveries[0].last_error


def test_registration_refuses_bad_values_beside_their_field(
    hooks: Webhooks, people: tuple[User, User, User]
) -> None:
    _, alice, _ = people
    for url, events, format, field in [
        ("ftp://x.org/", ["finished"], "json", "url"),
        ("https://x.org/", [], "json", "events"),
        ("https://x.org/", ["finished", "exploded"], "json", "events"),
        ("https://x.org/", ["finished"], "xml", "format"),
    ]:
        with pytest.raises(ValidationError) as caught:
            hooks.register(alice, url, events, format)
        assert caught.value.field == field
    assert hooks.of_user("alice") == []


def test_own_tests_are_followed_and_finished_ones_reported_once_since(
    runs: Runs, storage: Storage, clock: Clock, people: tuple[User, User, User], repo_url: str
) -> None:
    root, alice, _ = people
    follows = Follows(storage, clock)
    run_id = submit(runs, alice, repo_url)
    assert follows.followed("alice") == {run_id}
    since = clock()
    clock.advance(5)
    runs.lifecycle.approve(root, run_id)
    runs.lifecycle.stop(root, run_id)
    (finished,) = follows.finished_since("alice", since)
    assert (finished.run_id, finished.title) == (run_id, "patch vs master")
    assert follows.finished_since("alice", finished.at) == []
    follows.change("alice", run_id, follow=False)
    assert follows.finished_since("alice", since) == []


def test_a_delivery_goes_to_the_checked_address_and_never_resolves_the_name_again(
    sink: Receiver,
) -> None:
    """The name below resolves nowhere: only the address checked is used, with
    the URL's host in the Host header (and as TLS's server name for https)."""
    port = urlsplit(sink.url).port or 80
    url = f"http://hooks.invalid:{port}/hook?x=1"
    target = Destination(url, "http", "hooks.invalid", port, "127.0.0.1")
    assert webhooks.post(target, b"{}", {"Content-Type": "application/json"}) == 200
    (request,) = sink.requests
    assert (request.path, request.headers["Host"]) == ("/hook?x=1", f"hooks.invalid:{port}")


def test_a_dripping_receiver_is_cut_off_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webhooks, "DELIVERY_DEADLINE_SECONDS", 1.0)
    with dripping_receiver() as slow:
        port = urlsplit(slow.url).port or 80
        target = Destination(slow.url, "http", "127.0.0.1", port, "127.0.0.1")
        started = time.monotonic()
        with pytest.raises(webhooks.DeliveryTooSlow, match="no answer within 1 s"):
            webhooks.post(target, b"{}", {})
        assert time.monotonic() - started < 10  # a hang guard: the deadline is 1 s


def test_a_slow_receiver_holds_up_only_its_owners_deliveries(
    runs: Runs,
    hooks: Webhooks,
    sink: Receiver,
    people: tuple[User, User, User],
    repo_url: str,
) -> None:
    """Bob's delivery goes out while alice's receiver is still dripping its
    reply (far from the deadline), not after it: each owner has a lane."""
    root, alice, bob = people
    with dripping_receiver() as slow:
        hooks.register(alice, slow.url, ["approved"], "json")
        hooks.register(bob, sink.url, ["approved"], "json")
        runs.lifecycle.approve(root, submit(runs, alice, repo_url))  # alice's goes first
        runs.lifecycle.approve(root, submit(runs, bob, repo_url))
        delivered: list[int] = []
        failed: list[BaseException] = []

        def one_pass() -> None:
            try:
                delivered.append(hooks.run())
            except BaseException as error:  # reported by the test, not lost in the thread
                failed.append(error)
                raise

        passing = threading.Thread(target=one_pass)
        passing.start()
        wait_for(lambda: bool(sink.requests) or bool(failed))
        assert failed == []
        assert slow.cut_at == []  # alice's connection is still open
    passing.join(30)  # the receiver closed: alice's attempt ends now
    assert delivered == [1]
    (alices,) = hooks.of_user("alice")
    assert alices.deliveries[0].status == "pending"


def test_one_owner_sends_at_most_its_share_per_pass(
    runs: Runs, hooks: Webhooks, sink: Receiver, people: tuple[User, User, User], repo_url: str
) -> None:
    root, alice, _ = people
    hooks.register(alice, sink.url, ["approved"], "json")
    for _ in range(webhooks.PER_OWNER_PER_PASS + 1):
        runs.lifecycle.approve(root, submit(runs, alice, repo_url))
    assert hooks.run() == webhooks.PER_OWNER_PER_PASS
    assert hooks.run() == 1  # the rest in the next pass


def wait_for(done: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_quarantine_reaches_the_owners_and_the_approvers_hooks_for_every_run(
    storage: Storage, sink: Receiver, people: tuple[User, User, User]
) -> None:
    """A machine's event: its owner's hook and an approver's hook for every
    run get it; another user's hook does not, nor a hook without the event."""
    root, alice, bob = people
    hooks = Webhooks(storage, base_url="https://arbiter.test", allow_private=True, clock=Clock(NOW))
    hooks.register(alice, sink.url + "/owner", ["quarantined"], "json")
    hooks.register(alice, sink.url + "/runs-only", ["finished"], "json")
    hooks.register(bob, sink.url + "/other", ["quarantined"], "json")
    hooks.register(root, sink.url + "/all", ["quarantined"], "discord", all_runs=True)
    seed_quarantine(storage, QUARANTINE_RUNS)
    checker = MachineHealth(storage, take_back=lambda *_: 0, changed=lambda: None, clock=Clock(NOW))
    assert checker.check() == [BAD]
    assert hooks.run() == 2
    by_path = {r.path: json.loads(r.body) for r in sink.requests}
    assert set(by_path) == {"/hook/owner", "/hook/all"}
    owner = by_path["/hook/owner"]
    assert owner["event"] == "quarantined"
    assert owner["machine"] == {
        "name": BAD,
        "owner": "alice",
        "url": f"https://arbiter.test/workers/{BAD}",
        "reason": "crashes on 3 runs",
    }
    assert by_path["/hook/all"]["content"].startswith(f"Machine {BAD} quarantined: crashes on 3")
    owners = next(view for view in hooks.of_user("alice") if view.hook.url.endswith("/owner"))
    assert [(d.event, d.worker, d.run_id) for d in owners.deliveries] == [("quarantined", BAD, "")]
    assert hooks.run() == 0  # sent once
