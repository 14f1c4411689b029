"""When a run is decided, and the colour it finishes with (reference 3.1)."""

from dataclasses import replace
from typing import Any

from arbiter.domain.actions import SYSTEM_USER
from arbiter.domain.runs.documents import run_label
from arbiter.domain.runs.registry import Change, RunState
from arbiter.stats.elo import fixed_games_elo
from arbiter.storage.records import RunRecord

LOS_GREEN = 0.95
LOS_YELLOW = 0.05


def games_of(run: RunRecord) -> int:
    return run.wins + run.losses + run.draws


def is_decided(run: RunRecord) -> bool:
    """An SPRT reached a bound, or every game the run asked for was played."""
    sprt = run.args.get("sprt")
    if sprt is not None and sprt.get("state"):
        return True
    return games_of(run) >= int(run.args["num_games"])


def is_undecided(run: RunRecord) -> bool:
    return not is_decided(run)


def colour(run: RunRecord) -> tuple[bool, bool]:
    """(is_green, is_yellow) of a finished run."""
    args = run.args
    if "spsa" in args:
        return False, False
    sprt = args.get("sprt")
    if sprt is not None:
        state = sprt.get("state", "")
        return state == "accepted", state == "rejected" and run.wins > run.losses
    los = _los(run)
    if los is None:
        return False, False
    return los > LOS_GREEN, los < LOS_YELLOW and run.wins > run.losses


def _los(run: RunRecord) -> float | None:
    if sum(run.pentanomial) == 0:
        return None
    try:
        return fixed_games_elo(run.pentanomial).los
    except (ValueError, ZeroDivisionError):  # all pairs alike: no spread to test
        return None


def finish(state: RunState, change: Change, *, now: float, by: str, message: str) -> None:
    """Fold into `change`: every active task stops, the run is finished and coloured."""
    for task in state.tasks:
        current = change.current(task)
        if current.active:
            change.save_task(current, replace(current, active=False, spsa_params=None))
    green, yellow = colour(change.run)
    change.run = replace(
        change.run, finished=True, is_green=green, is_yellow=yellow, nps=0.0, games_per_minute=0.0
    )
    change.log.append(run_action(change.run, "finished_run", by, message, now))


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
        "run": run_label(run.id, str(run.args.get("new_tag", ""))),
        **extra,
    }
