"""SPSA through the run service: perturbations handed out, results applied once."""

import pytest

from arbiter.domain.accounts import User
from arbiter.domain.errors import BadRequest
from arbiter.domain.runs.service import Runs
from arbiter.protocol.messages import SpsaResult
from tests.domain.runs.support import approved_run, pairs, take_task, worker

PARAMS = "Alpha,100,0,200,10,0.0020\nBeta,50,0,100,5,0.0020"


@pytest.fixture
def spsa_run(runs: Runs, alice: User, root: User, repo_url: str) -> tuple[str, int]:
    spsa = {"raw_params": PARAMS, "A": 0.1, "alpha": 0.602, "gamma": 0.101}
    run_id = approved_run(runs, alice, root, repo_url, num_games=10000, spsa=spsa)
    return run_id, take_task(runs, alice, worker())["task_id"]


def thetas(runs: Runs, run_id: str) -> list[float]:
    state = runs.context.registry.get(run_id)
    assert state is not None
    return [param["theta"] for param in state.run.args.spsa["params"]]


def test_perturbation_is_symmetric_around_theta(runs: Runs, spsa_run: tuple[str, int]) -> None:
    run_id, task_id = spsa_run
    reply = runs.ingest.request_spsa(worker(), run_id, task_id)
    assert reply["task_alive"] is True
    assert [p["name"] for p in reply["w_params"]] == ["Alpha", "Beta"]
    for white, black, theta in zip(reply["w_params"], reply["b_params"], [100, 50], strict=True):
        assert white["value"] - theta == pytest.approx(theta - black["value"])
        assert white["flip"] in {-1, 1}


def test_result_moves_theta_and_advances_iter(runs: Runs, spsa_run: tuple[str, int]) -> None:
    run_id, task_id = spsa_run
    reply = runs.ingest.request_spsa(worker(), run_id, task_id)
    result = SpsaResult(wins=2, losses=0, draws=0, num_games=2, sig=reply["sig"])
    runs.ingest.update_task(worker(), run_id, task_id, pairs(ww=1), result)
    moved = thetas(runs, run_id)
    for param, before in zip(reply["w_params"], [100.0, 50.0], strict=True):
        assert (moved.pop(0) - before) * param["flip"] > 0
    state = runs.context.registry.get(run_id)
    assert state is not None
    assert state.run.args.spsa["iter"] == 1
    assert state.tasks[task_id].spsa_params is None  # single use


def test_wrong_signature_leaves_theta(runs: Runs, spsa_run: tuple[str, int]) -> None:
    run_id, task_id = spsa_run
    reply = runs.ingest.request_spsa(worker(), run_id, task_id)
    result = SpsaResult(wins=2, losses=0, draws=0, num_games=2, sig=(reply["sig"] + 1) % 2**32)
    runs.ingest.update_task(worker(), run_id, task_id, pairs(ww=1), result)
    assert thetas(runs, run_id) == [100.0, 50.0]


def test_request_spsa_on_a_plain_run_is_refused(
    runs: Runs, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, num_games=2000)
    task_id = take_task(runs, alice, worker())["task_id"]
    with pytest.raises(BadRequest, match="not an SPSA run"):
        runs.ingest.request_spsa(worker(), run_id, task_id)
