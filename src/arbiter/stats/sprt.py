"""Sequential SPRT state with dynamic overshoot correction (reference §3.1, §5.1).

The state is a plain dict (TypedDict) in exactly the reference's JSON shape,
because it is stored in the database and sent on the wire:
`{alpha, beta, elo0, elo1, elo_model, state, llr, batch_size, lower_bound,
upper_bound, overshoot | lost_samples, illegal_update?}`. `update_sprt` never
mutates its input; it returns the next state.
"""

from collections.abc import Sequence
from typing import Literal, NotRequired, TypedDict

from arbiter.stats.llr import llr as exact_llr
from arbiter.stats.llr import sprt_bounds

ELO_MODELS = ("normalized", "logistic", "BayesElo")

SprtDecision = Literal["", "accepted", "rejected"]


class Overshoot(TypedDict):
    """Running extremes of the LLR path, for Siegmund's overshoot estimate (Cor. 8.33)."""

    last_update: int
    skipped_updates: int
    ref0: float
    m0: float
    sq0: float
    ref1: float
    m1: float
    sq1: float


class SprtState(TypedDict):
    """An SPRT as stored under `run.args.sprt`."""

    alpha: float
    beta: float
    elo0: float
    elo1: float
    elo_model: str
    state: str
    llr: float
    batch_size: int
    lower_bound: float
    upper_bound: float
    overshoot: NotRequired[Overshoot]
    lost_samples: NotRequired[int]
    illegal_update: NotRequired[int]


def _fresh_overshoot() -> Overshoot:
    return Overshoot(
        last_update=0, skipped_updates=0, ref0=0.0, m0=0.0, sq0=0.0, ref1=0.0, m1=0.0, sq1=0.0
    )


def new_sprt(
    alpha: float = 0.05,
    beta: float = 0.05,
    elo0: float = 0.0,
    elo1: float = 2.0,
    *,
    elo_model: str = "normalized",
    batch_size: int = 1,
) -> SprtState:
    """A fresh SPRT: no decision, LLR 0, overshoot tracking from zero samples."""
    if elo_model not in ELO_MODELS:
        raise ValueError(f"unknown elo_model {elo_model!r} (normalized, logistic or BayesElo)")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1 game pair, got {batch_size!r}")
    lower, upper = sprt_bounds(alpha, beta)
    return SprtState(
        alpha=alpha,
        beta=beta,
        elo0=elo0,
        elo1=elo1,
        elo_model=elo_model,
        state="",
        llr=0.0,
        batch_size=batch_size,
        lower_bound=lower,
        upper_bound=upper,
        overshoot=_fresh_overshoot(),
    )


def sprt_results(
    elo_model: str, wins: int, losses: int, draws: int, pentanomial: Sequence[int] | None
) -> list[int]:
    """The counts an SPRT is computed on: pentanomial when known, [L, D, W] for BayesElo."""
    if pentanomial is not None and elo_model != "BayesElo":
        return list(pentanomial)
    return [losses, draws, wins]


def _track(o: Overshoot, llr: float, samples: int, batch_size: int) -> None:
    """One step of overshoot bookkeeping on a private copy (§5.1 sequential update)."""
    if samples == o["last_update"]:
        return
    if samples == o["last_update"] + batch_size:
        if llr < o["ref0"]:
            delta = llr - o["ref0"]
            o["m0"] += delta
            o["sq0"] += delta * delta
            o["ref0"] = llr
        if llr > o["ref1"]:
            delta = llr - o["ref1"]
            o["m1"] += delta
            o["sq1"] += delta * delta
            o["ref1"] = llr
    else:  # updates were lost: restart the extremes from here
        o["ref0"] = o["ref1"] = llr
        o["skipped_updates"] += samples - o["last_update"] - 1
    o["last_update"] = samples


def overshoot_corrections(state: SprtState) -> tuple[float, float]:
    """(o0, o1): expected overshoot below A and above B, −sq0/(2·m0) and sq1/(2·m1)."""
    o = state.get("overshoot")
    if o is None:
        return 0.0, 0.0
    o0 = -o["sq0"] / o["m0"] / 2.0 if o["m0"] != 0 else 0.0
    o1 = o["sq1"] / o["m1"] / 2.0 if o["m1"] != 0 else 0.0
    return o0, o1


def decide(llr: float, lower: float, upper: float, o0: float, o1: float) -> SprtDecision:
    """Rejected below A + o0, accepted above B − o1, otherwise keep testing."""
    if llr < lower + o0:
        return "rejected"
    if llr > upper - o1:
        return "accepted"
    return ""


def update_sprt(state: SprtState, results: Sequence[int]) -> SprtState:
    """The next state after cumulative `results` (pentanomial, or [L, D, W] for BayesElo).

    A sample count not divisible by the batch size, or one that went down (a
    purge), breaks the batch contract the overshoot estimate relies on: it is
    recorded (`illegal_update`, `lost_samples`) and tracking stops.
    """
    new = state.copy()
    if "overshoot" in state:
        new["overshoot"] = state["overshoot"].copy()
    llr = exact_llr(state["elo_model"], state["elo0"], state["elo1"], results)
    new["llr"] = llr
    samples = sum(results)
    if samples % state["batch_size"] != 0:
        new["illegal_update"] = samples
        new.pop("overshoot", None)
    o = new.get("overshoot")
    if o is not None and samples < o["last_update"]:
        new["lost_samples"] = o["last_update"] - samples
        del new["overshoot"]
    elif o is not None:
        _track(o, llr, samples, state["batch_size"])
    o0, o1 = overshoot_corrections(new)
    new["state"] = decide(llr, state["lower_bound"], state["upper_bound"], o0, o1)
    return new
