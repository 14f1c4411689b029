"""Classic SPSA as the reference runs it (reference §6).

One iteration is one game pair. Each parameter has gain schedules
c_k = c/(k+1)^γ and R_k = a/(A + k + 1)^α / c_k², chosen so that the last
iteration uses exactly c_end and r_end. A batch plays the new engine at
θ + c_k·flip against the base at θ − c_k·flip and moves θ by R_k·c_k·(W − L)·flip.
"""

import math
import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict

DEFAULT_A_RATIO = 0.1
DEFAULT_ALPHA = 0.602
DEFAULT_GAMMA = 0.101


class SpsaState(TypedDict):
    """A tuning as stored under a run's `spsa`, in the reference's shape: the
    stability constant `A` (not its ratio), the iteration reached, each
    parameter as `SpsaParam`'s fields and the chart samples (`history_sample`)."""

    A: float
    alpha: float
    gamma: float
    raw_params: str
    iter: int
    num_iter: int
    params: list[dict[str, Any]]
    param_history: list[list[dict[str, float]]]


@dataclass(frozen=True, slots=True)
class SpsaSchedule:
    """Run-wide gain-schedule constants: A, α, γ and the number of iterations (pairs)."""

    big_a: float
    alpha: float
    gamma: float
    num_iter: int


def make_schedule(
    num_games: int,
    a_ratio: float = DEFAULT_A_RATIO,
    alpha: float = DEFAULT_ALPHA,
    gamma: float = DEFAULT_GAMMA,
) -> SpsaSchedule:
    """num_iter = num_games // 2 (one iteration per pair), A = int(A_ratio·num_games/2)."""
    return SpsaSchedule(int(a_ratio * num_games / 2), alpha, gamma, num_games // 2)


class SpsaParseError(ValueError):
    """A parameter line is malformed; the message starts with its line number."""


@dataclass(frozen=True, slots=True)
class SpsaParam:
    """One tuned parameter: bounds, end gains, derived c, a_end, a, and current θ."""

    name: str
    start: float
    min: float
    max: float
    c_end: float
    r_end: float
    c: float
    a_end: float
    a: float
    theta: float

    def clip(self, value: float) -> float:
        """Keep a value within [min, max]."""
        return min(max(value, self.min), self.max)


def _number(text: str, what: str, lineno: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SpsaParseError(f"line {lineno}: {what} {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise SpsaParseError(f"line {lineno}: {what} must be finite, got {text.strip()!r}")
    return value


def _fields(line: str, lineno: int) -> tuple[str, list[float]]:
    parts = line.split(",")
    if len(parts) != 6:
        raise SpsaParseError(
            f"line {lineno}: expected 6 comma-separated fields name,start,min,max,c_end,r_end,"
            f" got {len(parts)}"
        )
    name = parts[0].strip()
    if not name:
        raise SpsaParseError(f"line {lineno}: the parameter name is empty")
    labels = ("start", "min", "max", "c_end", "r_end")
    return name, [_number(t, w, lineno) for t, w in zip(parts[1:], labels, strict=True)]


def _check(values: Sequence[float], lineno: int) -> None:
    start, low, high, c_end, r_end = values
    if not low <= start <= high:
        raise SpsaParseError(
            f"line {lineno}: start {start:g} is not within [min, max] = [{low:g}, {high:g}]"
        )
    if c_end <= 0:
        raise SpsaParseError(f"line {lineno}: c_end must be > 0, got {c_end:g}")
    if r_end < 0:
        raise SpsaParseError(f"line {lineno}: r_end must be >= 0, got {r_end:g}")


def parse_params(raw: str, schedule: SpsaSchedule) -> list[SpsaParam]:
    """Parse `name,start,min,max,c_end,r_end` lines (blank lines ignored) into parameters."""
    params: list[SpsaParam] = []
    seen: set[str] = set()
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        name, values = _fields(line, lineno)
        _check(values, lineno)
        if name in seen:
            raise SpsaParseError(f"line {lineno}: parameter {name!r} is defined twice")
        seen.add(name)
        params.append(make_param(name, values, schedule))
    if not params:
        raise SpsaParseError("no parameters: give one name,start,min,max,c_end,r_end line each")
    return params


def make_param(name: str, values: Sequence[float], schedule: SpsaSchedule) -> SpsaParam:
    """From (start, min, max, c_end, r_end): c = c_end·N^γ, a_end = r_end·c_end²,
    a = a_end·(A + N)^α, θ = start."""
    start, low, high, c_end, r_end = values
    a_end = r_end * c_end**2
    c = c_end * schedule.num_iter**schedule.gamma
    a = a_end * (schedule.big_a + schedule.num_iter) ** schedule.alpha
    return SpsaParam(name, start, low, high, c_end, r_end, c, a_end, a, start)


def gains(param: SpsaParam, k: int, schedule: SpsaSchedule) -> tuple[float, float]:
    """(c_k, R_k) at 0-based iteration k."""
    c_k = param.c / (k + 1) ** schedule.gamma
    r_k = param.a / (schedule.big_a + k + 1) ** schedule.alpha / c_k**2
    return c_k, r_k


def draw_flips(count: int, rng: random.Random) -> list[int]:
    """One ±1 perturbation sign per parameter."""
    return [1 if rng.random() < 0.5 else -1 for _ in range(count)]


def pack_flips(flips: Sequence[int]) -> bytes:
    """Flips as bits, most significant first, 1 ↔ +1 (the stored `packed_flips`)."""
    out = bytearray((len(flips) + 7) // 8)
    for i, flip in enumerate(flips):
        if flip > 0:
            out[i // 8] |= 0x80 >> (i % 8)
    return bytes(out)


def unpack_flips(packed: bytes, count: int) -> list[int]:
    """Inverse of pack_flips for `count` parameters."""
    return [1 if packed[i // 8] & (0x80 >> (i % 8)) else -1 for i in range(count)]


def flips_signature(packed: bytes) -> int:
    """The `sig` sent to the worker: CRC-32 of the packed flips."""
    return zlib.crc32(packed)


def engine_values(
    params: Sequence[SpsaParam], flips: Sequence[int], k: int, schedule: SpsaSchedule
) -> tuple[list[float], list[float]]:
    """(new engine values clip(θ + c_k·flip), base values clip(θ − c_k·flip))."""
    white: list[float] = []
    black: list[float] = []
    for param, flip in zip(params, flips, strict=True):
        c_k, _ = gains(param, k, schedule)
        white.append(param.clip(param.theta + c_k * flip))
        black.append(param.clip(param.theta - c_k * flip))
    return white, black


def update_thetas(
    params: Sequence[SpsaParam],
    flips: Sequence[int],
    k: int,
    result: int,
    schedule: SpsaSchedule,
) -> list[SpsaParam]:
    """θ ← clip(θ + R_k·c_k·(wins − losses)·flip) at the batch's stored iteration k."""
    updated = []
    for param, flip in zip(params, flips, strict=True):
        c_k, r_k = gains(param, k, schedule)
        updated.append(replace(param, theta=param.clip(param.theta + r_k * c_k * result * flip)))
    return updated


def history_period(num_iter: int, n_params: int) -> float:
    """Iterations between chart samples: num_iter / S, S = 100, 10000/#params or 1."""
    if n_params < 100:
        samples = 100.0
    elif n_params < 1000:
        samples = 10000.0 / n_params
    else:
        samples = 1.0
    return num_iter / samples


def history_due(history_len: int, iteration: int, num_iter: int, n_params: int) -> bool:
    """Whether a new history sample is due: len(history) + 1 ≤ iter/period."""
    return history_len + 1 <= iteration / history_period(num_iter, n_params)


def history_sample(
    params: Sequence[SpsaParam], k: int, schedule: SpsaSchedule
) -> list[dict[str, float]]:
    """One chart sample [{theta, R, c}, …] at iteration k."""
    sample = []
    for param in params:
        c_k, r_k = gains(param, k, schedule)
        sample.append({"theta": param.theta, "R": r_k, "c": c_k})
    return sample
