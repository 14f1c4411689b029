"""Quarantine on real storage (both backends): the job convicts a machine on
evidence across runs of two authors, the scheduler refuses it, an approver
releases it and its evidence never counts again."""

from collections.abc import Callable

import pytest
from sqlalchemy import Engine

from arbiter.domain import quarantine
from arbiter.domain.errors import NotFound, PermissionDenied
from arbiter.domain.quarantine import MachineHealth
from arbiter.domain.workers import BlockedMachines
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter, NewAction
from tests.domain.runs.support import Clock, make_user, run_record, task_record

NOW = 1_900_000_000.0
BAD = "alice-8cores-0badbad0"


@pytest.fixture
def storage(engine: Engine) -> Storage:
    return Storage(engine)


def seed(storage: Storage, runs: list[tuple[str, str]], crashes: int = 12) -> None:
    """Runs (id, author) of six machines each, 500 games a machine: the bad one
    crashes `crashes` times on each, the others never."""
    with storage.write() as tx:
        for run_id, author in runs:
            tx.runs.add(run_record(id=run_id, username=author, last_updated=NOW - 3600))
            for task_id, name in enumerate([BAD, *(f"bob-8cores-0000000{i}" for i in range(5))]):
                tx.tasks.add(
                    task_record(
                        run_id=run_id,
                        task_id=task_id,
                        active=False,
                        worker_name=name,
                        username=name.split("-")[0],
                        wins=100,
                        losses=100,
                        draws=300,
                        crashes=crashes if name == BAD else 0,
                        pentanomial=(10, 40, 100, 40, 10),
                    )
                )


def health(
    storage: Storage, taken: list[str], changed: Callable[[], None] = lambda: None
) -> MachineHealth:
    return MachineHealth(
        storage,
        take_back=lambda name, message: taken.append(f"{name}: {message}") or 1,
        changed=changed,
        clock=Clock(NOW),
    )


RUNS = [("a" * 24, "carol"), ("b" * 24, "carol"), ("c" * 24, "dave")]


def test_a_machine_that_crashes_on_runs_of_two_authors_is_quarantined(storage: Storage) -> None:
    seed(storage, RUNS)
    taken: list[str] = []
    checker = health(storage, taken)
    assert checker.check() == [BAD]
    assert taken == [f"{BAD}: quarantined: crashes on 3 runs"]
    (record,) = checker.queue()
    assert (record.worker_name, record.active) == (BAD, True)
    assert {finding["run_id"] for finding in record.evidence} == {run for run, _ in RUNS}
    assert "12 crashes and 0 time losses in 500 games" in record.evidence[0]["detail"]
    assert checker.check() == []  # already quarantined: nothing new
    with storage.read() as tx:
        logged = tx.actions.query(ActionFilter(action="quarantine_worker"))
    assert [(a.worker, a.message) for a in logged] == [(BAD, "quarantined: crashes on 3 runs")]
    # The scheduler refuses it, with why.
    refused = BlockedMachines(storage, clock=Clock(0.0)).message(BAD)
    assert refused is not None
    assert "quarantined by the health check (crashes on 3 runs)" in refused


def test_runs_of_one_author_quarantine_nobody(storage: Storage) -> None:
    seed(storage, [("a" * 24, "carol"), ("b" * 24, "carol"), ("c" * 24, "carol")])
    assert health(storage, []).check() == []


def test_old_runs_give_no_evidence(storage: Storage) -> None:
    seed(storage, RUNS)
    checker = MachineHealth(
        storage, take_back=lambda *_: 0, changed=lambda: None, clock=Clock(NOW + 15 * 86400)
    )
    assert checker.check() == []


def test_a_released_machine_is_not_quarantined_again_on_the_same_runs(storage: Storage) -> None:
    seed(storage, RUNS)
    changes: list[int] = []
    checker = health(storage, [], changed=lambda: changes.append(1))
    checker.check()
    bob = make_user(storage, "bob")
    with pytest.raises(PermissionDenied):
        checker.release(bob, BAD)
    root = make_user(storage, "root", approver=True)
    checker.release(root, BAD)
    assert checker.queue() == []
    record = checker.record_of(BAD)
    assert record is not None
    assert (record.active, record.released_by) == (False, "root")
    assert checker.check() == []
    assert BlockedMachines(storage, clock=Clock(0.0)).message(BAD) is None
    assert changes == [1, 1]
    with pytest.raises(NotFound):
        checker.release(root, BAD)


def test_silent_tasks_come_from_the_event_log(storage: Storage) -> None:
    seed(storage, RUNS, crashes=0)
    with storage.write() as tx:
        for run_id, _ in RUNS:
            for task_id in range(3):
                tx.actions.add(
                    NewAction(
                        time=NOW - 600,
                        action="dead_task",
                        username="alice",
                        run_id=run_id,
                        task_id=task_id,
                        worker=f"{BAD}-1234",
                        message="no heartbeat",
                    )
                )
            # The silent tasks are tasks of the machine too.
            for task_id in range(10, 13):
                tx.tasks.add(
                    task_record(run_id=run_id, task_id=task_id, active=False, worker_name=BAD)
                )
    assert health(storage, []).check() == [BAD]


def test_a_machines_health_over_time_is_its_latest_runs(storage: Storage) -> None:
    seed(storage, RUNS)
    history = health(storage, []).history(BAD, limit=2)
    assert len(history) == 2
    assert {h.author for h in history} <= {"carol", "dave"}
    assert all((h.tasks, h.games, h.crashes) == (1, 500, 12) for h in history)
    assert health(storage, []).history("nobody-8cores-00000000") == []


def test_each_check_keeps_every_machines_record_and_its_owners_see_theirs(
    storage: Storage,
) -> None:
    """The record of each machine over the window: counts, failed tasks from
    the event log, and the evidence by kind; the next check replaces it."""
    seed(storage, RUNS)
    with storage.write() as tx:
        tx.actions.add(
            NewAction(
                time=NOW - 600,
                action="failed_task",
                username="bob",
                run_id=RUNS[0][0],
                task_id=1,
                worker="bob-8cores-00000001-5678",
                message="the build failed",
            )
        )
    checker = health(storage, [])
    checker.check()
    bad = checker.health_of(BAD)
    assert bad is not None
    assert (bad.username, bad.checked_at) == ("alice", NOW)
    record = bad.record
    assert (record["runs"], record["authors"], record["games"]) == (3, 2, 1500)
    assert (record["crashes"], record["failed"], record["silent"]) == (36, 0, 0)
    assert record["evidence"] == {"crashes": sorted(run for run, _ in RUNS)}
    (alices,) = checker.health_of_owner("Alice")  # names are matched as usernames are
    assert alices.worker_name == BAD
    bobs = checker.health_of_owner("bob")
    assert [m.worker_name for m in bobs] == [f"bob-8cores-0000000{i}" for i in range(5)]
    assert [m.record["failed"] for m in bobs] == [0, 1, 0, 0, 0]
    assert all(m.record["evidence"] == {} for m in bobs)
    later = MachineHealth(
        storage, take_back=lambda *_: 0, changed=lambda: None, clock=Clock(NOW + 15 * 86400)
    )
    later.check()  # nothing within its window: no record is left
    assert later.health_of(BAD) is None


def test_records_are_written_a_few_at_a_time_and_all_kept(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short write each (the results thread waits for SQLite's write lock):
    six machines in three transactions, every one kept, none left over."""
    monkeypatch.setattr(quarantine, "RECORDS_PER_WRITE", 2)
    seed(storage, RUNS)
    checker = health(storage, [])
    checker.check()
    names = [
        r.worker_name for r in (*checker.health_of_owner("alice"), *checker.health_of_owner("bob"))
    ]
    assert len(names) == 6
