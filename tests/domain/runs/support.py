"""Helpers for runs tests: workers, results, submissions."""

import threading
from typing import Any

import msgspec

from arbiter.domain.accounts import User
from arbiter.domain.runs.service import Runs
from arbiter.protocol.messages import Stats, WorkerInfo
from arbiter.storage import Storage
from arbiter.storage.base import NewUser
from arbiter.storage.records import RunRecord, TaskRecord, no_results

T0 = 1_800_000_000.0


class Clock:
    """Time that moves only when a test says so."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def run_record(**changes: Any) -> RunRecord:
    """An approved run with no games and an empty spec, for tests of pure functions."""
    # Imported here: bench/fold_cost.py loads this module's other helpers into
    # older revisions, which have no run_spec.
    from arbiter.storage.run_spec import RunSpec, spec_of

    fields: dict[str, Any] = {
        "id": "",
        "version": 1,
        "username": "alice",
        "start_time": 0.0,
        "last_updated": 0.0,
        "tc_base": 10.0,
        "rescheduled_from": None,
        "approved": True,
        "approver": "root",
        "finished": False,
        "deleted": False,
        "failed": False,
        "failures": 0,
        "is_green": False,
        "is_yellow": False,
        "workers": 0,
        "cores": 0,
        "committed_games": 0,
        "total_games": 0,
        "wins": 0,
        "losses": 0,
        "draws": 0,
        "crashes": 0,
        "time_losses": 0,
        "pentanomial": (0, 0, 0, 0, 0),
        "nps": 0.0,
        "games_per_minute": 0.0,
        "args": RunSpec(),
    }
    if isinstance(changes.get("args"), dict):  # a spec given as its stored document
        changes["args"] = spec_of(changes["args"])
    return RunRecord(**{**fields, **changes})


def task_record(**changes: Any) -> TaskRecord:
    """An active task of `run_record()`'s run, without results; `changes` override."""
    fields: dict[str, Any] = {
        "run_id": "0" * 24,
        "task_id": 0,
        "num_games": 8,
        "start": 0,
        "active": True,
        "bad": False,
        "last_updated": 0.0,
        "username": "u",
        "worker_name": "w",
        "unique_key": "k",
        "remote_addr": "",
        "worker_info": {"concurrency": 1},
        **no_results(),
        "residual": None,
        "spsa_params": None,
    }
    return TaskRecord(**{**fields, **changes})


def make_user(storage: Storage, name: str, *, approver: bool = False) -> User:
    from arbiter.domain.accounts import User as UserView

    with storage.write() as tx:
        record = tx.users.add(
            NewUser(
                username=name,
                email=f"{name}@example.org",
                password_hash="unused",
                registration_time=T0,
                pending=False,
                is_approver=approver,
            )
        )
    return UserView.from_record(record)


def worker(username: str = "alice", key: str = "abcd", **overrides: Any) -> WorkerInfo:
    """Arbiter's worker (`hosted_books`: it fetches any book and any repository,
    as the tests' local repositories need); `hosted_books=False` is the official
    worker's machine."""
    info = {
        "uname": "Linux 6.1",
        "architecture": ["64bit", "ELF"],
        "concurrency": 4,
        "max_memory": 8000,
        "min_threads": 1,
        "username": username,
        "version": 325,
        "python_version": [3, 11, 7],
        "gcc_version": [12, 2, 0],
        "compiler": "g++",
        "unique_key": f"{key}-1234-5678-9abc-def012345678",
        "modified": False,
        "worker_arch": "x86-64-bmi2",
        "ARCH": "?",
        "nps": 800000.0,
        "near_github_api_limit": False,
        "hosted_books": True,
        **overrides,
    }
    return msgspec.convert(info, type=WorkerInfo)


def pairs(ll: int = 0, ld: int = 0, dd: int = 0, wd: int = 0, ww: int = 0) -> Stats:
    """Consistent cumulative stats from a pentanomial (DD+WL counted as draws)."""
    wins = wd + 2 * ww
    losses = ld + 2 * ll
    draws = ld + 2 * dd + wd
    return Stats(wins, losses, draws, 0, 0, [ll, ld, dd, wd, ww])


def submit(runs: Runs, user: User, repo_url: str, **args: Any) -> str:
    body: dict[str, Any] = {
        "tests_repo": repo_url,
        "base_tag": "master",
        "new_tag": "patch",
        "tc": "10+0.1",
        **args,
    }
    return runs.lifecycle.submit(user, body)


def approved_run(runs: Runs, owner: User, approver: User, repo_url: str, **args: Any) -> str:
    run_id = submit(runs, owner, repo_url, **args)
    runs.lifecycle.approve(approver, run_id)
    return run_id


def take_task(runs: Runs, user: User, info: WorkerInfo, addr: str = "10.0.0.1") -> dict[str, Any]:
    reply = runs.scheduler.request_task(info, user, addr)
    assert "task_id" in reply, reply
    return reply


def hold_lock(state_lock: Any) -> tuple[threading.Thread, threading.Event]:
    """Hold `state_lock` in another thread until the returned event is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with state_lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    return thread, release
