"""Submitting runs and acting on them: approve, stop, modify, purge, delete."""

import threading

import pytest

from arbiter.domain.accounts import User
from arbiter.domain.errors import NotFound, PermissionDenied, ValidationError
from arbiter.domain.runs.approval import ApprovalPolicy, approve_refusal
from arbiter.domain.runs.lifecycle import allowed_actions
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from tests.domain.runs.support import (
    approved_run,
    make_user,
    pairs,
    submit,
    take_task,
    worker,
)


def actions_of(storage: Storage, run_id: str) -> list[str]:
    with storage.read() as tx:
        return [a.action for a in reversed(tx.actions.query(ActionFilter(run_id=run_id)))]


def test_submit_resolves_tags_with_git_and_stores_an_unapproved_run(
    runs: Runs, alice: User, repo_url: str, storage: Storage
) -> None:
    run_id = submit(runs, alice, repo_url, sprt={"elo0": 0, "elo1": 2})
    with storage.read() as tx:
        run = tx.runs.get(run_id)
    assert run is not None
    assert not run.approved
    assert not run.finished
    assert len(run.args.resolved_new) == 40
    assert run.args.resolved_new != run.args.resolved_base
    assert run.args.sprt["batch_size"] == 16  # 16 pairs at 10+0.1
    assert actions_of(storage, run_id) == ["new_run"]


def test_unknown_branch_names_the_field(runs: Runs, alice: User, repo_url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        submit(runs, alice, repo_url, new_tag="no-such-branch")
    assert caught.value.field == "new_tag"


def test_invalid_arguments_store_nothing(
    runs: Runs, alice: User, repo_url: str, storage: Storage
) -> None:
    with pytest.raises(ValidationError):
        submit(runs, alice, repo_url, tc="ten seconds")
    with storage.read() as tx:
        assert tx.runs.unfinished() == []


def test_approver_cannot_approve_own_run(
    runs: Runs, root: User, repo_url: str, storage: Storage
) -> None:
    make_user(storage, "carol", approver=True)  # someone else could approve it
    run_id = submit(runs, root, repo_url)
    with pytest.raises(PermissionDenied, match="your own run"):
        runs.lifecycle.approve(root, run_id)
    assert "approve" not in allowed_actions(root, runs.queries.run(run_id), self_approval=False)


def test_the_only_active_approver_approves_their_own_run(
    runs: Runs, root: User, repo_url: str, storage: Storage
) -> None:
    """First use with one account: nobody else could ever approve it."""
    blocked = make_user(storage, "carol", approver=True)
    with storage.write() as tx:  # a blocked approver approves nothing
        tx.users.set_blocked(blocked.id, True)
    run_id = submit(runs, root, repo_url)
    assert runs.lifecycle.self_approval()
    runs.lifecycle.approve(root, run_id)
    assert runs.queries.run(run_id).approver == "root"


def test_the_setting_allows_self_approval_beside_other_approvers(
    storage: Storage, root: User, repo_url: str
) -> None:
    make_user(storage, "carol", approver=True)
    runs = Runs(storage, task_gate=threading.Semaphore(5), approval=ApprovalPolicy(allow_self=True))
    run_id = submit(runs, root, repo_url)
    assert "approve" in allowed_actions(root, runs.queries.run(run_id), self_approval=True)
    runs.lifecycle.approve(root, run_id)
    assert runs.queries.run(run_id).approved


def test_why_approve_is_missing(runs: Runs, root: User, alice: User, repo_url: str) -> None:
    run = runs.queries.run(submit(runs, root, repo_url))
    assert approve_refusal(None, run, self_approval=False) is not None
    assert "only approvers" in (approve_refusal(alice, run, self_approval=False) or "")
    assert "your own run" in (approve_refusal(root, run, self_approval=False) or "")
    assert approve_refusal(root, run, self_approval=True) is None


def test_only_approvers_approve(runs: Runs, alice: User, repo_url: str) -> None:
    run_id = submit(runs, alice, repo_url)
    with pytest.raises(PermissionDenied):
        runs.lifecycle.approve(alice, run_id)


def test_approve_writes_its_action(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url)
    assert actions_of(storage, run_id) == ["new_run", "approve_run"]
    with pytest.raises(ValidationError):
        runs.lifecycle.approve(root, run_id)


def test_stop_finishes_the_run_and_frees_its_tasks(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url)
    take_task(runs, alice, worker())
    runs.lifecycle.stop(alice, run_id)
    with storage.read() as tx:
        run = tx.runs.get(run_id)
        tasks = tx.tasks.for_run(run_id)
    assert run is not None
    assert run.finished
    assert run.workers == 0
    assert run.cores == 0
    assert not any(task.active for task in tasks)
    assert runs.context.registry.get(run_id) is None
    assert actions_of(storage, run_id)[-1] == "stop_run"
    with pytest.raises(ValidationError, match="already finished"):
        runs.lifecycle.stop(alice, run_id)


def test_strangers_cannot_stop(runs: Runs, alice: User, root: User, repo_url: str) -> None:
    from tests.domain.runs.support import make_user

    bob = make_user(runs.context.storage, "bob")
    run_id = approved_run(runs, alice, root, repo_url)
    with pytest.raises(PermissionDenied):
        runs.lifecycle.stop(bob, run_id)


def test_modify_more_games_reopens_a_stopped_sprt(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 2})
    runs.lifecycle.stop(alice, run_id)
    runs.lifecycle.modify(root, run_id, {"num_games": 900000})
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert not state.run.finished
    assert state.run.args.num_games == 900000
    assert actions_of(storage, run_id)[-1] == "modify_run"


def test_modify_priority_by_owner_loses_approval(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url)
    runs.lifecycle.modify(alice, run_id, {"priority": 5})
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert not state.run.approved


def test_delete_hides_the_run(runs: Runs, alice: User, root: User, repo_url: str) -> None:
    run_id = approved_run(runs, alice, root, repo_url)
    runs.lifecycle.delete(alice, run_id)
    with pytest.raises(NotFound):
        runs.queries.get_run(run_id)
    assert run_id not in runs.queries.active_runs()


def test_an_approver_purges_one_machine_from_every_run_still_going(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    """A quarantined machine's results leave the runs in one action."""
    run_ids = [approved_run(runs, alice, root, repo_url, num_games=100000) for _ in range(2)]
    suspect, honest = worker(key="0bad"), worker(key="0good")
    for _ in run_ids:  # one task of each machine on each run
        for info in (suspect, honest):
            reply = take_task(runs, alice, info, addr=info.unique_key)
            assert reply["run"]["_id"] in run_ids
            runs.ingest.update_task(info, reply["run"]["_id"], reply["task_id"], pairs(dd=10))
    name = "alice-4cores-0bad"
    with pytest.raises(PermissionDenied):
        runs.lifecycle.purge_machine(alice, name)
    assert runs.lifecycle.purge_machine(root, name) == 2
    with storage.read() as tx:
        purged = [t for run_id in run_ids for t in tx.tasks.for_run(run_id) if t.bad]
        totals = [tx.runs.get(run_id) for run_id in run_ids]
    assert {t.worker_name for t in purged} == {name}
    assert sum(run.draws for run in totals if run is not None) == 40  # the honest machine's
    assert runs.lifecycle.purge_machine(root, name) == 0  # nothing left to purge


def test_purge_removes_an_outlier_worker(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=100000)
    honest = [worker(key=f"h{i:03d}") for i in range(6)]
    cheat = worker(key="bad1")
    for info in [*honest, cheat]:
        reply = take_task(runs, alice, info, addr=info.unique_key)
        task_id = reply["task_id"]
        stats = (
            pairs(ww=90, ld=5, dd=5) if info is cheat else pairs(ll=10, ld=20, dd=40, wd=20, ww=10)
        )
        runs.ingest.update_task(info, run_id, task_id, stats)
    assert runs.lifecycle.purge(root, run_id) == 1
    with storage.read() as tx:
        tasks = tx.tasks.for_run(run_id)
        run = tx.runs.get(run_id)
    assert [t.worker_name.endswith("bad1") for t in tasks if t.bad] == [True]
    assert run is not None
    assert run.wins == sum(t.wins for t in tasks)
    assert actions_of(storage, run_id)[-1] == "purge_run"
