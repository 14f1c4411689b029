"""Blocking worker machines: who may, what is logged, what the scheduler then refuses."""

from collections.abc import Callable

import pytest
from sqlalchemy import Engine

from arbiter.domain.accounts import User
from arbiter.domain.errors import NotFound, PermissionDenied, ValidationError
from arbiter.domain.runs.service import Runs
from arbiter.domain.workers import BlockedMachines, WorkerBlocks, may_change
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from tests.domain.runs.support import Clock, make_user

NAME = "alice-4cores-abcd"


@pytest.fixture
def storage(engine: Engine) -> Storage:
    return Storage(engine)


@pytest.fixture
def blocks(storage: Storage) -> WorkerBlocks:
    return WorkerBlocks(storage, changed=lambda: None, clock=Clock())


def test_a_machine_never_seen_is_allowed_and_says_so(
    blocks: WorkerBlocks, storage: Storage
) -> None:
    make_user(storage, "alice")
    status = blocks.status(NAME)
    assert (status.blocked, status.owner, status.last_updated) == (False, "alice", None)
    assert not status.seen


def test_a_machine_of_no_account_is_not_found(blocks: WorkerBlocks) -> None:
    """Nothing guesses an owner for a name no account can have played under."""
    with pytest.raises(NotFound, match="No account is named alice"):
        blocks.status(NAME)


def test_the_owner_blocks_and_unblocks_with_a_logged_message(
    blocks: WorkerBlocks, storage: Storage
) -> None:
    alice = make_user(storage, "alice")
    blocks.set_blocked(alice, NAME, blocked=True, message="  overheating  ")
    status = blocks.status(NAME)
    assert (status.blocked, status.message) == (True, "overheating")
    assert [w.name for w in blocks.blocked()] == [NAME]
    blocks.set_blocked(alice, NAME, blocked=False, message="")
    assert not blocks.status(NAME).blocked
    assert blocks.blocked() == []
    with storage.read() as tx:
        logged = tx.actions.query(ActionFilter(action="block_worker"))
    # The reference's message is the verb alone: the reason stays with the block.
    assert [a.message for a in logged] == ["unblocked", "blocked"]
    assert {a.worker for a in logged} == {NAME}


def test_an_approver_may_block_anyones_machine(blocks: WorkerBlocks, storage: Storage) -> None:
    root = make_user(storage, "root", approver=True)
    blocks.set_blocked(root, NAME, blocked=True, message="")
    assert blocks.status(NAME).blocked


def test_others_may_not(blocks: WorkerBlocks, storage: Storage) -> None:
    bob = make_user(storage, "bob")
    assert not may_change(bob, NAME)
    assert not may_change(None, NAME)
    with pytest.raises(PermissionDenied):
        blocks.set_blocked(bob, NAME, blocked=True, message="")


def test_the_owner_is_the_account_in_any_spelling(blocks: WorkerBlocks, storage: Storage) -> None:
    alice = make_user(storage, "alice")
    assert may_change(alice, "ALICE-4cores-abcd")
    blocks.set_blocked(alice, "Alice-4cores-abcd", blocked=True, message="hot")
    # Stored under the account's own spelling, seen under any other.
    assert [w.name for w in blocks.blocked()] == [NAME]
    assert blocks.status("ALICE-4cores-abcd").blocked
    blocked = BlockedMachines(storage, clock=Clock(0.0))
    assert blocked.message("ALICE-4cores-abcd") == "hot"
    assert blocked.message(NAME) == "hot"
    assert blocked.message("ALICE-4cores-efgh") is None


def test_bad_names_and_long_messages_are_refused(blocks: WorkerBlocks, storage: Storage) -> None:
    alice = make_user(storage, "alice")
    with pytest.raises(NotFound):
        blocks.status("not a worker")
    with pytest.raises(ValidationError) as refused:
        blocks.set_blocked(alice, NAME, blocked=True, message="x" * 501)
    assert refused.value.field == "message"


def test_the_scheduler_refuses_a_blocked_machine(
    storage: Storage, repo_url: str, new_runs: Callable[..., Runs]
) -> None:
    import threading

    from tests.domain.runs.support import approved_run, worker

    alice: User = make_user(storage, "alice")
    root = make_user(storage, "root", approver=True)
    runs = new_runs(storage, task_gate=threading.Semaphore(5), clock=Clock())
    approved_run(runs, alice, root, repo_url)
    changed = runs.blocked_machines.forget
    runs.scheduler.request_task(worker(key="efgh"), alice, "10.0.0.2")  # blocks now read
    blocks = WorkerBlocks(storage, changed)
    assert blocks.status("ALICE-4cores-efgh").seen  # in any spelling of its owner
    assert not blocks.status(NAME).seen
    WorkerBlocks(storage, changed).set_blocked(root, NAME, blocked=True, message="bad results")
    reply = runs.scheduler.request_task(worker(), alice, "10.0.0.1")
    assert "bad results" in reply["error"]


def test_blocks_made_elsewhere_reach_the_scheduler_within_the_refresh(storage: Storage) -> None:
    """Another process (a secondary serving the page) writes the table directly."""
    clock = Clock(0.0)
    blocked = BlockedMachines(storage, clock=clock, refresh_seconds=2.0)
    assert blocked.message(NAME) is None
    with storage.write() as tx:
        tx.worker_blocks.set(NAME, blocked=True, message="bad book", at=0.0)
    clock.advance(1.9)
    assert blocked.message(NAME) is None  # not yet re-read
    clock.advance(0.1)
    assert blocked.message(NAME) == "bad book"
    assert blocked.message("alice-4cores-efgh") is None


def test_a_change_made_here_is_seen_at_once(storage: Storage) -> None:
    clock = Clock(0.0)
    blocked = BlockedMachines(storage, clock=clock)
    blocks = WorkerBlocks(storage, changed=blocked.forget, clock=clock)
    root = make_user(storage, "root", approver=True)
    assert blocked.message(NAME) is None
    blocks.set_blocked(root, NAME, blocked=True, message="")
    assert blocked.message(NAME) == ""  # blocked, without a message
    blocks.set_blocked(root, NAME, blocked=False, message="")
    assert blocked.message(NAME) is None
