"""A task as the worker needs it, read from the `request_task` reply (reference 1.2).

The run's `args` are the server's document; only what the worker uses is
read, and a missing or ill-typed field fails the task with a message that
names it (a WorkerError, so `failed_task` reports it).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arbiter.protocol.messages import Stats
from arbiter.worker.errors import WorkerError


@dataclass(frozen=True, slots=True)
class Assignment:
    run_id: str
    task_id: int
    num_games: int
    start: int  # games of the run before this task: places its openings
    stats: Stats  # already reported for this task (a resumed task), usually zero
    tests_repo: str
    base_sha: str
    new_sha: str
    base_tag: str
    new_tag: str
    base_signature: str  # bench nodes; "" when the run gives none
    new_signature: str
    tc: str
    new_tc: str
    threads: int
    book: str
    book_depth: int  # moves (plies / 2) taken from a PGN book
    book_sri: str
    base_options: str
    new_options: str
    adjudication: bool
    sprt_batch_size: int | None  # game pairs per SPRT update
    spsa: bool
    base_nets: tuple[str, ...]
    new_nets: tuple[str, ...]
    # The run's SPRT when the task was given: (LLR, lower bound, upper bound).
    sprt_llr: tuple[float, float, float] | None = None

    @property
    def games_reported(self) -> int:
        return self.stats.wins + self.stats.losses + self.stats.draws

    @property
    def label(self) -> str:
        return f"{self.new_tag} vs {self.base_tag}"


def parse_assignment(reply: Mapping[str, Any]) -> Assignment:
    try:
        run = reply["run"]
        args = run["args"]
        task = run["my_task"]
        sprt = args.get("sprt")
        return Assignment(
            run_id=_text(run, "_id"),
            task_id=_int(reply, "task_id"),
            num_games=_int(task, "num_games"),
            start=_int(task, "start"),
            stats=_stats(task.get("stats")),
            tests_repo=_text(args, "tests_repo"),
            base_sha=_text(args, "resolved_base"),
            new_sha=_text(args, "resolved_new"),
            base_tag=_text(args, "base_tag"),
            new_tag=_text(args, "new_tag"),
            base_signature=str(args.get("base_signature") or ""),
            new_signature=str(args.get("new_signature") or ""),
            tc=_text(args, "tc"),
            new_tc=str(args.get("new_tc") or args["tc"]),
            threads=_int(args, "threads"),
            book=_text(args, "book"),
            book_depth=_int(args, "book_depth"),
            book_sri=str(args.get("book_sri") or ""),
            base_options=str(args.get("base_options") or ""),
            new_options=str(args.get("new_options") or ""),
            adjudication=bool(args.get("adjudication", True)),
            sprt_batch_size=_int(sprt, "batch_size") if sprt else None,
            spsa=bool(args.get("spsa")),
            base_nets=tuple(str(n) for n in args.get("base_nets") or ()),
            new_nets=tuple(str(n) for n in args.get("new_nets") or ()),
            sprt_llr=_sprt_llr(sprt),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise WorkerError(f"unusable request_task reply: {type(error).__name__} {error}") from None


def _sprt_llr(sprt: Any) -> tuple[float, float, float] | None:
    """Shown to the owner only: a run without these numbers still plays."""
    if not isinstance(sprt, Mapping):
        return None
    values: list[float] = []
    for key in ("llr", "lower_bound", "upper_bound"):
        value = sprt.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        values.append(float(value))
    return values[0], values[1], values[2]


def _text(mapping: Mapping[str, Any], key: str) -> str:
    value = mapping[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string")
    return value


def _int(mapping: Mapping[str, Any], key: str) -> int:
    value = mapping[key]
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a number")
    number = int(value)  # book_depth is stored as text
    if number < 0:
        raise ValueError(f"{key} must not be negative")
    return number


def _stats(raw: Any) -> Stats:
    if not raw:
        return Stats(0, 0, 0, 0, 0, [0, 0, 0, 0, 0])
    return Stats(
        wins=int(raw["wins"]),
        losses=int(raw["losses"]),
        draws=int(raw["draws"]),
        crashes=int(raw.get("crashes", 0)),
        time_losses=int(raw.get("time_losses", 0)),
        pentanomial=[int(n) for n in raw.get("pentanomial", [0, 0, 0, 0, 0])],
    )
