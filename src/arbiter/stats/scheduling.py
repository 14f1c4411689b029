"""Pure scheduling numbers: game duration, task size, SPRT batch, itp, memory, worker speed.

Reference §4.3, §4.5, §2.5 and the worked examples of §5.3. Time controls are
the run's `tc` strings: `[moves/]time[+increment]`, e.g. "10+0.1", "40/20".
"""

import math
import re
from dataclasses import dataclass

TASK_DURATION_S = 1800.0
STC = "10+0.1"
REFERENCE_NPS = 628_000.0
MIN_NPS = 180_000.0
GAME_MOVES = 68  # typical game length used to price increments
DURATION_FACTOR = 2 * 0.92  # two engines, 92% of the clock used on average
WORKER_FIXED_MIB = 444  # fastchess + book 220, 2×80 binaries, 64 python
PER_GAME_MIB = 12 + 139  # engine process + net, per engine
PER_THREAD_MIB = 31

_TC = re.compile(r"(?:([1-9]\d*)/)?(\d+(?:\.\d+)?)(?:\+(\d+(?:\.\d+)?))?")


@dataclass(frozen=True, slots=True)
class TimeControl:
    """A parsed time control: moves per period (None = whole game), seconds, increment."""

    moves: int | None
    time: float
    increment: float


def parse_tc(tc: str) -> TimeControl:
    """Parse `[moves/]time[+inc]`; ValueError naming the string otherwise."""
    match = _TC.fullmatch(tc.strip())
    if match is None:
        raise ValueError(f"time control {tc!r} is not of the form [moves/]time[+increment]")
    moves, time, inc = match.groups()
    return TimeControl(int(moves) if moves else None, float(time), float(inc or 0.0))


def game_duration(tc: str) -> float:
    """Estimated seconds per game: (time + 68·inc) × 2 × 0.92, moves/time scaled by 68/moves."""
    parsed = parse_tc(tc)
    # time × (68/moves), in this order: (time × 68)/moves can differ in the last
    # bit, and the reference's itp, and so its rank order, is built on this value.
    time = parsed.time * (GAME_MOVES / parsed.moves) if parsed.moves else parsed.time
    return (time + GAME_MOVES * parsed.increment) * DURATION_FACTOR


def tc_ratio(tc: str, threads: int = 1) -> float:
    """Cost of one game relative to a single-threaded 10+0.1 game."""
    return game_duration(tc) * threads / game_duration(STC)


def sprt_batch_size(tc: str, threads: int = 1) -> int:
    """Game pairs per SPRT update: max(1, int(0.5 + 16/tc_ratio))."""
    return max(1, int(0.5 + 16.0 / tc_ratio(tc, threads)))


def worker_task_cap(tc: str, threads: int, concurrency: int, batch_size: int | None = None) -> int:
    """Games a worker plays in 30 min, rounded to whole SPRT batches (≥ 1) or pairs (≥ 1)."""
    games = TASK_DURATION_S / game_duration(tc) * (concurrency // threads)
    unit = 2 * batch_size if batch_size else 2
    # Halves round up, as the reference's int(x + 1/2) does (round() would send
    # 562.5 units to 562, a task a pair shorter than the reference's).
    return unit * max(1, int(games / unit + 0.5))


def task_size(
    tc: str, threads: int, concurrency: int, remaining: int, batch_size: int | None = None
) -> int:
    """Games for a new task: min(worker cap, remaining); SPRT rounds remaining up to a batch."""
    if batch_size:
        unit = 2 * batch_size
        remaining = unit * math.ceil(remaining / unit)
    return min(worker_task_cap(tc, threads, concurrency, batch_size), remaining)


def internal_throughput(
    throughput: float,
    ratio: float,
    same_user_runs: int,
    games: int,
    *,
    sprt_llr: float | None = None,
    sprt_elo0: float | None = None,
) -> float:
    """itp = clamp(throughput, 1, 500)·r^0.774 (r > 1)·36/(36 + k²)·(1 + b) (reference §4.3).

    b = min(games/200000, 1), plus 0.1 when an SPRT's LLR is above 2 and
    another 0.1 if its elo0 is positive: nearly-finished tests get a push.
    """
    itp = min(max(throughput, 1.0), 500.0)
    if ratio > 1.0:
        itp *= ratio**0.774
    itp *= 36.0 / (36.0 + same_user_runs**2)
    boost = min(games / 200_000, 1.0)
    if sprt_llr is not None and sprt_llr > 2.0:
        # One addition of 0.1 or 0.2, as the reference makes it: adding 0.1 twice
        # can differ in the last bit, and runs are ranked by cores/itp.
        boost += 0.2 if sprt_elo0 is not None and sprt_elo0 > 0.0 else 0.1
    return itp * (1.0 + boost)


def memory_need(threads: int, hash_new: int, hash_base: int, concurrency: int) -> int:
    """MiB a worker needs for a run: 444 + 2k(12 + 139 + 31·threads) + k(Hash_new + Hash_base)."""
    k = concurrency // threads
    return (
        WORKER_FIXED_MIB
        + 2 * k * (PER_GAME_MIB + PER_THREAD_MIB * threads)
        + k * (hash_new + hash_base)
    )


def max_concurrency_for_memory(max_memory: int) -> int:
    """Concurrency a worker's memory allows at STC: ⌊(max_memory − 444)/396⌋."""
    per_game = 2 * (16 + PER_GAME_MIB + PER_THREAD_MIB)
    return (max_memory - WORKER_FIXED_MIB) // per_game


def min_nps(concurrency: int) -> float:
    """Slowest acceptable nps per thread: 180000/(1 + 3·tanh((concurrency − 1)/8))."""
    return MIN_NPS / (1.0 + 3.0 * math.tanh((concurrency - 1) / 8.0))


def tc_factor(nps: float) -> float:
    """Time-control multiplier of a worker: reference nps / measured nps."""
    return REFERENCE_NPS / nps


def scale_tc(tc: str, factor: float) -> str:
    """Multiply time and increment by `factor`, 3 decimals, moves kept (e.g. 20.933+0.209)."""
    parsed = parse_tc(tc)
    text = f"{parsed.time * factor:.3f}"
    if parsed.moves:
        text = f"{parsed.moves}/{text}"
    if parsed.increment:
        text += f"+{parsed.increment * factor:.3f}"
    return text
