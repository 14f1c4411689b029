"""When a run is decided, and the colour it finishes with (reference 3.1)."""

from typing import Any

from arbiter.domain.actions import SYSTEM_USER
from arbiter.domain.runs.documents import run_label
from arbiter.domain.runs.registry import Change, RunState
from arbiter.stats.elo import fixed_games_elo
from arbiter.stats.sprt import SprtState, sprt_results
from arbiter.stats.sprt_elo import SprtElo, sprt_elo
from arbiter.storage.records import RunRecord, evolve

LOS_GREEN = 0.95
LOS_YELLOW = 0.05


def games_of(run: RunRecord) -> int:
    return run.wins + run.losses + run.draws


def pentanomial_of(run: RunRecord) -> tuple[int, ...] | None:
    """The run's pentanomial, or None for a run played before pairs were counted
    (imported from an old Fishtest: its pentanomial is all zeros, its games not)."""
    if sum(run.pentanomial) == 0 and games_of(run) > 0:
        return None
    return run.pentanomial


def elo_counts(run: RunRecord) -> list[int]:
    """What a fixed-games Elo is computed on: the pentanomial, or [L, D, W] when
    the run has none (as the reference does)."""
    pentanomial = pentanomial_of(run)
    return [run.losses, run.draws, run.wins] if pentanomial is None else list(pentanomial)


def is_decided(run: RunRecord) -> bool:
    """An SPRT reached a bound, or every game the run asked for was played."""
    sprt = run.args.sprt
    if sprt is not None and sprt.get("state"):
        return True
    return games_of(run) >= run.args.num_games


def is_undecided(run: RunRecord) -> bool:
    return not is_decided(run)


def colour(run: RunRecord) -> tuple[bool, bool]:
    """(is_green, is_yellow) of a finished run."""
    if run.args.spsa is not None:
        return False, False
    sprt = run.args.sprt
    if sprt is not None:
        state = sprt.get("state", "")
        return state == "accepted", state == "rejected" and run.wins > run.losses
    los = _los(run)
    if los is None:
        return False, False
    return los > LOS_GREEN, los < LOS_YELLOW and run.wins > run.losses


def _los(run: RunRecord) -> float | None:
    if games_of(run) == 0:
        return None
    try:
        return fixed_games_elo(elo_counts(run)).los
    except (ValueError, ZeroDivisionError):  # all pairs alike: no spread to test
        return None


def finish(state: RunState, change: Change, *, now: float) -> None:
    """Fold into `change`: every active task stops, the run is finished and coloured.

    The logged `finished_run` is the reference's: by the run's owner, with its
    result line. Callers that finish a run for another reason (a stop, a
    delete) replace that entry with their own action.
    """
    for task in state.tasks:
        current = change.current(task)
        if current.active:
            change.save_task(current, evolve(current, active=False, spsa_params=None))
    green, yellow = colour(change.run)
    change.run = evolve(
        change.run, finished=True, is_green=green, is_yellow=yellow, nps=0.0, games_per_minute=0.0
    )
    run = change.run
    change.log.append(run_action(run, "finished_run", run.username, finished_message(run), now))


def finished_message(run: RunRecord) -> str:
    """The reference's result line, e.g.
    `Result:accepted Elo:2.10[0.35,3.85] LOS:99% Games:1024 Ptnml:[2,100,300,98,12]`.
    """
    if run.args.spsa is not None:
        return "SPSA tune finished"
    sprt = run.args.sprt
    if sprt is not None:
        verdict, estimate = str(sprt.get("state", "")), _sprt_estimate(run, sprt)
    else:
        verdict, estimate = ("accepted" if run.is_green else "rejected"), _fixed_estimate(run)
    parts = [f"Result:{verdict}"]
    if estimate is not None:  # a statistic that fails must not stop the run finishing
        parts.append(estimate_text(*estimate))
    pentanomial = ",".join(str(count) for count in run.pentanomial)
    parts += [f"Games:{2 * sum(run.pentanomial)}", f"Ptnml:[{pentanomial}]"]
    return " ".join(parts)


Estimate = tuple[float, float, float, float]  # Elo, interval low and high, LOS


def estimate_text(elo: float, low: float, high: float, los: float) -> str:
    """`Elo:2.10[0.35,3.85] LOS:99%`, printed as the reference prints it."""
    return f"Elo:{elo:.2f}[{low:.2f},{high:.2f}] LOS:{los:.0%}"


def sprt_elo_of(run: RunRecord, sprt: SprtState) -> SprtElo | None:
    """The SPRT Elo estimate of a run's results (`sprt`: its args' sprt), or None
    when the statistics cannot be computed. [THREAD] for pages and API views."""
    model = str(sprt["elo_model"])
    counts = sprt_results(model, run.wins, run.losses, run.draws, pentanomial_of(run))
    try:
        return sprt_elo(
            counts,
            float(sprt["elo0"]),
            float(sprt["elo1"]),
            model,
            alpha=float(sprt["alpha"]),
            beta=float(sprt["beta"]),
            ldw=[run.losses, run.draws, run.wins],
        )
    except (ValueError, ZeroDivisionError):
        return None


def _sprt_estimate(run: RunRecord, sprt: SprtState) -> Estimate | None:
    found = sprt_elo_of(run, sprt)
    return None if found is None else (found.elo, found.ci[0], found.ci[1], found.los)


def _fixed_estimate(run: RunRecord) -> Estimate | None:
    try:
        found = fixed_games_elo(elo_counts(run))
    except (ValueError, ZeroDivisionError):
        return None
    return found.elo, found.ci[0], found.ci[1], found.los


def run_action(
    run: RunRecord, action: str, username: str, message: str, now: float, **extra: Any
) -> dict[str, Any]:
    """Keyword arguments of `actions.record` for an action about a run."""
    return {
        "time": now,
        "action": action,
        "username": username or SYSTEM_USER,
        "message": message,
        "run_id": run.id,
        "run": run_label(run.id, run.args.new_tag),
        **extra,
    }
