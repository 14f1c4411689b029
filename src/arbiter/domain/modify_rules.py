"""The reference's "Modify rules" for a run (reference 8, `/tests/modify`).

Pure: the caller passes what the rules need to know about the run and who is
asking; `apply_modification` returns the new values, the changes for the
`modify_run` log entry, and whether the run loses its approval. Whether the
actor may modify the run at all (owner or approver) is checked by the caller,
as for stop, purge and delete.
"""

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Literal

from arbiter.domain.errors import ValidationError
from arbiter.domain.form_values import read_bool, read_float, read_int, read_text
from arbiter.domain.run_args import MAX_GAMES, MAX_INFO_CHARS, MAX_THROUGHPUT

MODIFY_WINDOW = timedelta(days=30)
GAMES_STEP = 1000
# A non-approver may go up to these (or the run's current value, if higher)
# without the run needing a new approval.
FREE_THROUGHPUT = 100.0
FREE_PRIORITY = 0.0

RunKind = Literal["sprt", "spsa", "fixed"]


@dataclass(frozen=True, slots=True)
class Modifiable:
    """The run arguments `/tests/modify` may change."""

    num_games: int
    priority: float
    throughput: float
    auto_purge: bool
    info: str


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the rules need to know about the run being modified."""

    kind: RunKind
    owner: str
    start_time: datetime
    approved: bool
    failed: bool
    current: Modifiable


@dataclass(frozen=True, slots=True)
class Modification:
    values: Modifiable
    # field -> (old, new), only the fields that change: the modify_run diff.
    changes: dict[str, tuple[object, object]]
    approval_lost: bool


def apply_modification(
    run: RunFacts,
    requested: Mapping[str, object],
    *,
    actor: str,
    is_approver: bool,
    now: datetime,
) -> Modification:
    """Apply a modify request; keys absent from `requested` keep their value.

    Raises ValidationError(field, message) for the first rule broken.
    `now` and `run.start_time` must both be aware (or both naive) datetimes.
    """
    if now - run.start_time > MODIFY_WINDOW:
        raise ValidationError("run", "a run can only be modified within 30 days of its start")
    old = run.current
    new = replace(
        old,
        num_games=_num_games(run, requested),
        priority=read_float(requested, "priority", old.priority),
        throughput=read_float(
            requested, "throughput", old.throughput, low=0.0, high=MAX_THROUGHPUT
        ),
        auto_purge=read_bool(requested, "auto_purge", default=old.auto_purge),
        info=_info(run, requested, actor),
    )
    changes = {
        spec.name: (getattr(old, spec.name), getattr(new, spec.name))
        for spec in fields(Modifiable)
        if getattr(old, spec.name) != getattr(new, spec.name)
    }
    return Modification(new, changes, run.approved and _loses_approval(run, new, is_approver))


def _num_games(run: RunFacts, requested: Mapping[str, object]) -> int:
    old = run.current.num_games
    games = read_int(requested, "num_games", old, low=0, high=MAX_GAMES)
    if games == old:
        # Unchanged values are not re-checked: a run submitted through the
        # API may have a count that is not a multiple of 1000.
        return games
    if run.kind == "spsa":
        raise ValidationError(
            "num_games",
            "the number of games of an SPSA run cannot change: its gains are based on it",
        )
    if games % GAMES_STEP or games == 0:
        raise ValidationError("num_games", "must be a positive multiple of 1000")
    if run.kind == "fixed" and games > old:
        raise ValidationError(
            "num_games", "a fixed-games run cannot get more games: submit a new run"
        )
    return games


def _info(run: RunFacts, requested: Mapping[str, object], actor: str) -> str:
    old = run.current.info
    info = read_text(requested, "info", default=old, keep_lines=True).strip()
    if info == old:
        return old
    if actor != run.owner:
        raise ValidationError("info", "only the run's owner can change its info")
    if len(info) > MAX_INFO_CHARS:
        raise ValidationError("info", f"is longer than {MAX_INFO_CHARS:,} characters")
    return info


def _loses_approval(run: RunFacts, new: Modifiable, is_approver: bool) -> bool:
    # Approvers vouch for their own changes. Others may not buy a larger share
    # of the fleet, nor revive a failed run, without a fresh look.
    if is_approver:
        return False
    old = run.current
    return (
        run.failed
        or new.throughput > max(old.throughput, FREE_THROUGHPUT)
        or new.priority > max(old.priority, FREE_PRIORITY)
    )
