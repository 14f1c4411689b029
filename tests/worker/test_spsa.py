"""SPSA on the worker: rounding, options for each side, the batch report."""

import random

import pytest

from arbiter.worker.errors import WorkerError
from arbiter.worker.match.results import MatchStats
from arbiter.worker.spsa import batch_result, parse_spsa_reply, stochastic_round


def test_stochastic_rounding_averages_to_the_value() -> None:
    rng = random.Random(7)
    values = [stochastic_round(10.3, rng) for _ in range(10_000)]
    assert set(values) == {10, 11}
    assert sum(values) / len(values) == pytest.approx(10.3, abs=0.02)
    assert stochastic_round(-2.0, rng) == -2


def test_reply_to_options() -> None:
    reply = {
        "w_params": [{"name": "Skill Level", "value": 12.0, "c": 2.0, "R": 0.01, "flip": 1}],
        "b_params": [{"name": "Skill Level", "value": 8.0}],
        "sig": 123,
        "task_alive": True,
    }
    batch = parse_spsa_reply(reply, random.Random(1))
    assert batch.new_options == {"Skill Level": "12"}
    assert batch.base_options == {"Skill Level": "8"}
    assert batch.sig == 123
    with pytest.raises(WorkerError, match="request_spsa"):
        parse_spsa_reply({"w_params": []}, random.Random(1))


def test_batch_result() -> None:
    stats = MatchStats(wins=3, losses=1, draws=2, pentanomial=[0, 0, 1, 2, 0])
    result = batch_result(stats, 99)
    assert (result.wins, result.losses, result.draws, result.num_games, result.sig) == (
        3,
        1,
        2,
        6,
        99,
    )
