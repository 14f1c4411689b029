"""Reading a request_task reply."""

import pytest

from arbiter.worker.assignment import parse_assignment
from arbiter.worker.errors import WorkerError
from tests.worker.fakes import RUN_ID, task_reply


def test_fields() -> None:
    reply = task_reply(task_id=4, num_games=64, start=128, sprt={"batch_size": 8}, book_depth="6")
    a = parse_assignment(reply)
    assert (a.run_id, a.task_id, a.num_games, a.start) == (RUN_ID, 4, 64, 128)
    assert (a.base_sha, a.new_sha) == ("a" * 40, "b" * 40)
    assert (a.book_depth, a.sprt_batch_size, a.spsa) == (6, 8, False)
    assert a.games_reported == 0
    assert a.label == "patch vs master"
    assert a.sprt_llr is None  # shown when the run has one, never required


def test_the_runs_llr_is_kept_for_the_status_line() -> None:
    sprt = {"batch_size": 8, "llr": 1.5, "lower_bound": -2.94, "upper_bound": 2.94}
    assert parse_assignment(task_reply(sprt=sprt)).sprt_llr == (1.5, -2.94, 2.94)
    sprt["llr"] = "high"
    assert parse_assignment(task_reply(sprt=sprt)).sprt_llr is None


def test_resumed_stats_and_spsa() -> None:
    reply = task_reply(spsa={"iter": 0})
    reply["run"]["my_task"]["stats"] = {
        "wins": 2,
        "losses": 1,
        "draws": 1,
        "pentanomial": [0, 1, 0, 1, 0],
    }
    a = parse_assignment(reply)
    assert a.spsa
    assert a.games_reported == 4
    assert a.stats.crashes == 0


@pytest.mark.parametrize("broken", ["no run", "bad threads", "no sha"])
def test_unusable_replies_fail_the_task(broken: str) -> None:
    reply = task_reply()
    if broken == "no run":
        del reply["run"]
    elif broken == "bad threads":
        reply["run"]["args"]["threads"] = "many"
    else:
        reply["run"]["args"]["resolved_new"] = ""
    with pytest.raises(WorkerError, match="unusable request_task reply"):
        parse_assignment(reply)
