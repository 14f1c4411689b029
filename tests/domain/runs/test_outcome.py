"""The `finished_run` action: by the run's owner, with the reference's result
line (`Result:... Elo:...[...] LOS:...% Games:... Ptnml:[...]`)."""

import re
from typing import Any

import pytest

from arbiter.domain.accounts import User
from arbiter.domain.runs.outcome import finished_message
from arbiter.domain.runs.service import Runs
from arbiter.stats.elo import fixed_games_elo
from arbiter.storage import Storage
from arbiter.storage.base import ActionFilter
from arbiter.storage.records import RunRecord, evolve
from arbiter.storage.run_spec import RunSpec, spec_of
from tests.domain.runs.support import approved_run, pairs, take_task, worker

LINE = re.compile(
    r"Result:(accepted|rejected) Elo:-?\d+\.\d\d\[-?\d+\.\d\d,-?\d+\.\d\d\] LOS:\d+% "
    r"Games:\d+ Ptnml:\[\d+,\d+,\d+,\d+,\d+\]"
)


def finished(storage: Storage, run_id: str) -> list[Any]:
    with storage.read() as tx:
        logged = tx.actions.query(ActionFilter(run_id=run_id, max_count=50))
        run = tx.runs.get(run_id)
    assert run is not None
    return [run, [action for action in logged if action.action == "finished_run"]]


def play_out(runs: Runs, alice: User, run_id: str, stats: Any) -> None:
    info = worker()
    reply = take_task(runs, alice, info)
    runs.ingest.update_task(info, run_id, reply["task_id"], stats)


def test_a_fixed_games_run_logs_its_result_as_its_owner(
    runs: Runs, storage: Storage, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=24)
    play_out(runs, alice, run_id, pairs(ll=1, ld=2, dd=3, wd=4, ww=2))
    run, [action] = finished(storage, run_id)
    assert action.username == "alice"  # the owner, not the worker or the system
    assert LINE.fullmatch(action.message), action.message
    estimate = fixed_games_elo([1, 2, 3, 4, 2])
    verdict = "accepted" if run.is_green else "rejected"
    assert action.message == (
        f"Result:{verdict} Elo:{estimate.elo:.2f}[{estimate.ci[0]:.2f},{estimate.ci[1]:.2f}] "
        f"LOS:{estimate.los:.0%} Games:24 Ptnml:[1,2,3,4,2]"
    )


def test_an_sprt_logs_its_state_and_estimate(
    runs: Runs, storage: Storage, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 2})
    info = worker()
    for _ in range(6):
        reply = take_task(runs, alice, info)
        size = reply["run"]["my_task"]["num_games"] // 2
        runs.ingest.update_task(info, run_id, reply["task_id"], pairs(ww=size))
        run, logged = finished(storage, run_id)
        if run.finished:
            break
    assert run.args.sprt["state"] == "accepted"
    [action] = logged
    assert action.username == "alice"
    assert LINE.fullmatch(action.message), action.message
    assert action.message.startswith("Result:accepted Elo:")


def run_record(**changes: Any) -> RunRecord:
    base = dict.fromkeys(RunRecord.__slots__, 0)
    base.update(id="a" * 24, username="alice", args=RunSpec(), pentanomial=(0, 0, 0, 0, 0))
    base.update(is_green=False, rescheduled_from=None, approver="")
    if isinstance(changes.get("args"), dict):  # a spec given as its stored document
        changes["args"] = spec_of(changes["args"])
    return evolve(RunRecord(**base), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"args": {"spsa": {}}}, "SPSA tune finished"),
        # Every pair a draw: the reference's -0.00 (Python's format of -0.0) kept.
        (
            {"pentanomial": [0, 0, 5, 0, 0], "is_green": False},
            "Result:rejected Elo:-0.00[-6.81,6.81] LOS:50% Games:10 Ptnml:[0,0,5,0,0]",
        ),
    ],
)
def test_lines_of_odd_runs(changes: dict[str, Any], message: str) -> None:
    assert finished_message(run_record(**changes)) == message


def test_a_run_without_pentanomial_is_rated_on_its_games() -> None:
    """A run imported from before Fishtest counted pairs: its pentanomial is all
    zeros and its Elo, LOS and colour come from [L, D, W], as the reference's."""
    from arbiter.domain.runs.outcome import colour, elo_counts, pentanomial_of
    from tests.domain.runs.support import run_record

    old = run_record(wins=90, losses=50, draws=60, finished=True, args={"num_games": 200})
    assert pentanomial_of(old) is None
    assert elo_counts(old) == [50, 60, 90]
    assert colour(old) == (fixed_games_elo([50, 60, 90]).los > 0.95, False)
    assert colour(old)[0]
    assert "Elo:" in finished_message(old)
    new = evolve(old, pentanomial=(1, 10, 40, 35, 14))
    assert elo_counts(new) == [1, 10, 40, 35, 14]
    assert elo_counts(evolve(old, wins=0, losses=0, draws=0)) == [0, 0, 0, 0, 0]
