"""A Fishtest run document as Arbiter's run row, task rows and bad-task copies.

The reference keeps a run as one document: `args`, `results`, aggregates and
the `tasks` list (a task's id is its index), with a copy of each purged task in
`bad_tasks`. Old runs lack fields later versions added (pentanomial,
overshoot, approvals, ...): what Arbiter reads is filled with the value those
runs had in effect, and each filled field is counted in the report's notes.
"""

from dataclasses import dataclass, field
from typing import Any

import msgspec

from arbiter.domain.runs.documents import task_view, tc_base
from arbiter.importer.values import (
    id_time,
    integer,
    mapping,
    number,
    object_id_text,
    plain,
    text,
    timestamp,
)
from arbiter.protocol.workers import short_worker_name
from arbiter.stats.llr import llr, sprt_bounds
from arbiter.stats.sprt import sprt_results
from arbiter.storage.records import RunRecord, TaskRecord, evolve
from arbiter.storage.run_spec import checked_spec

RESULT_KEYS = ("wins", "losses", "draws", "crashes", "time_losses")


class Skip(Exception):  # noqa: N818 - a verdict on a document, not an error
    """The document cannot be imported; the message says why (the report counts it)."""


@dataclass(slots=True)
class ImportedRun:
    run: RunRecord
    tasks: list[TaskRecord]
    bad_copies: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


# The args an old run may lack, which its spec reads with the value they had in
# effect (RunSpec's defaults; an absent new_tc is the tc): each filled one is noted.
FILLED_ARGS = (
    "base_tag",
    "new_tag",
    "base_nets",
    "new_nets",
    "new_tc",
    "book",
    "book_depth",
    "threads",
    "resolved_base",
    "resolved_new",
    "msg_base",
    "msg_new",
    "base_options",
    "new_options",
    "info",
    "base_signature",
    "new_signature",
    "tests_repo",
    "auto_purge",
    "throughput",
    "itp",
    "priority",
    "adjudication",
)


def convert_run(document: dict[str, Any]) -> ImportedRun:
    run_id = object_id_text(document.get("_id"))
    if run_id is None:
        raise Skip("no 24-hex ObjectId in _id")
    raw_args = document.get("args")
    if not isinstance(raw_args, dict):
        raise Skip("no args")
    args = plain(raw_args)
    if not isinstance(args.get("tc"), str) or not isinstance(args.get("num_games"), int):
        raise Skip("args lack tc or num_games")
    username = args.get("username") or document.get("username")
    if not isinstance(username, str) or not username:
        raise Skip("no username in args")
    args["username"] = username
    notes = [f"args.{key} absent: filled" for key in FILLED_ARGS if key not in args]
    results = mapping(document.get("results"))
    counts = {key: integer(results.get(key)) for key in RESULT_KEYS}
    pentanomial = _pentanomial(results.get("pentanomial"))
    if pentanomial is None:
        notes.append("no pentanomial (trinomial-era run)")
    if isinstance(args.get("sprt"), dict):
        args["sprt"] = _sprt(args["sprt"], counts, pentanomial, notes)
    try:
        spec = checked_spec(args)
    except msgspec.ValidationError as error:
        raise Skip(f"args: {error}") from None
    start_time = timestamp(document.get("start_time")) or id_time(document) or 0.0
    last_updated = timestamp(document.get("last_updated")) or start_time
    tasks = [
        _task(run_id, task_id, task, last_updated)
        for task_id, task in enumerate(document.get("tasks") or [])
        if isinstance(task, dict)
    ]
    tasks = _with_starts(tasks)
    active = [task for task in tasks if task.active]
    run = RunRecord(
        id=run_id,
        version=integer(document.get("version")),
        username=text(username, 64),
        start_time=start_time,
        last_updated=last_updated,
        tc_base=number(document.get("tc_base"), tc_base(spec.tc)),
        rescheduled_from=object_id_text(document.get("rescheduled_from")),
        # Runs from before approvals were never held back.
        approved=bool(document.get("approved", True)),
        approver=text(document.get("approver"), 64),
        finished=bool(document.get("finished", False)),
        deleted=bool(document.get("deleted", False)),
        failed=bool(document.get("failed", False)),
        failures=integer(document.get("failures")),
        is_green=bool(document.get("is_green", False)),
        is_yellow=bool(document.get("is_yellow", False)),
        workers=len(active),
        cores=sum(integer(task.worker_info.get("concurrency")) for task in active),
        committed_games=integer(
            document.get("committed_games"), sum(_committed(task) for task in tasks)
        ),
        total_games=integer(document.get("total_games"), sum(t.num_games for t in tasks)),
        wins=counts["wins"],
        losses=counts["losses"],
        draws=counts["draws"],
        crashes=counts["crashes"],
        time_losses=counts["time_losses"],
        pentanomial=pentanomial or (0, 0, 0, 0, 0),
        nps=number(document.get("nps")),
        games_per_minute=number(document.get("games_per_minute")),
        args=spec,
    )
    copies = [
        _bad_copy(run_id, task, last_updated)
        for task in document.get("bad_tasks") or []
        if isinstance(task, dict)
    ]
    return ImportedRun(run, tasks, copies, notes)


def _pentanomial(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and len(value) == 5:
        return tuple(integer(count) for count in value)
    return None


def _sprt(
    sprt: dict[str, Any],
    counts: dict[str, int],
    pentanomial: tuple[int, ...] | None,
    notes: list[str],
) -> dict[str, Any]:
    """The SPRT state as stored, with what old runs lack filled: BayesElo was the
    only model before `elo_model` was recorded, and batches came later."""
    filled = dict(sprt)
    alpha, beta = number(sprt.get("alpha"), 0.05), number(sprt.get("beta"), 0.05)
    lower, upper = sprt_bounds(alpha, beta)
    defaults = {
        "alpha": alpha,
        "beta": beta,
        "elo_model": "BayesElo",
        "state": "",
        "batch_size": 1,
        "lower_bound": lower,
        "upper_bound": upper,
    }
    for key, default in defaults.items():
        if key not in filled:
            filled[key] = default
            notes.append(f"args.sprt.{key} absent: filled")
    if "llr" not in filled:
        model = str(filled["elo_model"])
        wins, losses, draws = counts["wins"], counts["losses"], counts["draws"]
        samples = sprt_results(model, wins, losses, draws, pentanomial)
        try:
            filled["llr"] = llr(
                model, number(filled.get("elo0")), number(filled.get("elo1")), samples
            )
        except (ValueError, ZeroDivisionError):
            filled["llr"] = 0.0
        notes.append("args.sprt.llr absent: computed")
    return filled


def _task(run_id: str, task_id: int, task: dict[str, Any], run_updated: float) -> TaskRecord:
    info = plain(task.get("worker_info")) if isinstance(task.get("worker_info"), dict) else {}
    username = text(info.get("username"), 64)
    unique_key = text(info.get("unique_key"), 64)
    concurrency = integer(info.get("concurrency"))
    name = short_worker_name(username, concurrency, unique_key) if unique_key else username
    stats = mapping(task.get("stats"))
    active = bool(task.get("active", False))
    return TaskRecord(
        run_id=run_id,
        task_id=integer(task.get("task_id"), task_id),
        num_games=integer(task.get("num_games")),
        start=integer(task.get("start"), -1),  # -1: worked out from the tasks before it
        active=active,
        bad=bool(task.get("bad", False)),
        last_updated=timestamp(task.get("last_updated")) or run_updated,
        username=username,
        worker_name=name[:120],
        unique_key=unique_key,
        remote_addr=text(info.get("remote_addr"), 64),
        worker_info=info,
        **{key: integer(stats.get(key)) for key in RESULT_KEYS},
        pentanomial=_pentanomial(stats.get("pentanomial")) or (0, 0, 0, 0, 0),
        residual=_residual(task.get("residual")),
        spsa_params=_spsa_params(task.get("spsa_params")) if active else None,
    )


def _with_starts(tasks: list[TaskRecord]) -> list[TaskRecord]:
    """Old tasks have no `start`: each began where the ones before it ended."""
    fixed, total = [], 0
    for task in tasks:
        fixed.append(task if task.start >= 0 else evolve(task, start=total))
        total += task.num_games
    return fixed


def _committed(task: TaskRecord) -> int:
    """The reference's committed games: played ones of an ended task, all of a live one."""
    return task.num_games if task.active else task.wins + task.losses + task.draws


def _residual(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _spsa_params(value: Any) -> dict[str, Any] | None:
    """The flips a live SPSA task was handed (bytes) as Arbiter keeps them (hex)."""
    if not isinstance(value, dict) or not isinstance(value.get("packed_flips"), bytes):
        return None
    return {"iter": integer(value.get("iter")), "packed_flips": value["packed_flips"].hex()}


def _bad_copy(run_id: str, task: dict[str, Any], run_updated: float) -> dict[str, Any]:
    """A purged task's copy as `/api/get_task/<run>/<n>bad` shows it (`bad_tasks.py`)."""
    record = _task(run_id, integer(task.get("task_id")), task, run_updated)
    record = evolve(record, active=False, bad=True, start=max(record.start, 0))
    view = task_view(record)
    view["residual_color"] = text(task.get("residual_color"), 16, "red")
    return view
