"""Shared helpers for the statistics tests: tolerance and the row-25/26 simulation."""

import random
from collections.abc import Sequence

import pytest

from arbiter.stats import SprtState, new_sprt, update_sprt

REL = 1e-9


def close(expected: float) -> object:
    """pytest.approx at the suite's 1e-9 relative tolerance."""
    return pytest.approx(expected, rel=REL, abs=1e-300)


def simulate(probs: Sequence[float], seed: int, batch: int = 16) -> tuple[list[int], SprtState]:
    """Reference §5.2 notes: draw pairs with random.Random(seed), update every `batch` pairs."""
    rng = random.Random(seed)
    total = sum(probs)
    cumulative = [sum(probs[: i + 1]) for i in range(len(probs))]
    state = new_sprt(0.05, 0.05, 0.0, 2.0, elo_model="normalized", batch_size=batch)
    penta = [0] * 5
    while not state["state"]:
        for _ in range(batch):
            u = rng.random() * total
            penta[next(i for i, c in enumerate(cumulative) if c > u)] += 1
        state = update_sprt(state, penta)
    return penta, state
