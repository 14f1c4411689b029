"""SPSA on the worker (reference 2.6): each batch asks the server for the
parameter values, plays them as UCI options, and reports the batch's own
W/L/D with the signature it was given. Pure apart from the random rounding.
"""

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arbiter.protocol.messages import SpsaResult
from arbiter.worker.errors import WorkerError
from arbiter.worker.match.results import MatchStats


@dataclass(frozen=True, slots=True)
class SpsaBatch:
    new_options: dict[str, str]  # w_params: the engine playing θ + c·flip
    base_options: dict[str, str]  # b_params: θ − c·flip
    sig: int


def parse_spsa_reply(reply: Mapping[str, Any], rng: random.Random) -> SpsaBatch:
    try:
        return SpsaBatch(
            new_options=_options(reply["w_params"], rng),
            base_options=_options(reply["b_params"], rng),
            sig=int(reply["sig"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise WorkerError(f"unusable request_spsa reply: {type(error).__name__} {error}") from None


def _options(params: Sequence[Mapping[str, Any]], rng: random.Random) -> dict[str, str]:
    return {str(p["name"]): str(stochastic_round(float(p["value"]), rng)) for p in params}


def stochastic_round(value: float, rng: random.Random) -> int:
    """⌊v + U(0,1)⌋: rounds up with probability equal to the fraction, so the
    integer options an engine takes average to the real-valued θ."""
    return math.floor(value + rng.random())


def batch_result(batch: MatchStats, sig: int) -> SpsaResult:
    return SpsaResult(
        wins=batch.wins,
        losses=batch.losses,
        draws=batch.draws,
        num_games=batch.games,
        sig=sig,
    )
