"""After an import: every finished run's Elo, CI, LOS and LLR as Arbiter
computes them from what it stored, against the dump.

Three comparisons, each listed when it fails:
- LLR: the value the dump stores (`args.sprt.llr`) against Arbiter's LLR of
  the imported results, within 1e-9;
- Elo, CI and LOS: the dump stores no number for them, so they are computed
  from the dump document's own counts and from the imported row, within 1e-9
  (the import kept every count the statistics read);
- the dump's `finished_run` action, where there is one, prints the reference's
  Elo, CI and LOS: Arbiter's, printed the same way, must read the same.

Streams the dump's files again (constant memory but for one message per
finished run). Runs in the calling thread.
"""

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from arbiter.domain.runs.outcome import elo_counts, estimate_text, pentanomial_of, sprt_elo_of
from arbiter.importer.dump import BadDocument, CollectionFile, DocumentStream
from arbiter.importer.values import integer, mapping, number, object_id_text
from arbiter.stats.elo import fixed_games_elo
from arbiter.stats.llr import llr
from arbiter.stats.sprt import SprtState, sprt_results
from arbiter.stats.sprt_elo import sprt_elo
from arbiter.storage import Storage
from arbiter.storage.records import RunRecord

TOLERANCE = 1e-9
BATCH = 500
SHOWN_DIFFERENCES = 50
# The numbers of the reference's finished_run line: Elo:1.23[0.12,2.34] LOS:97%
_MESSAGE = re.compile(r"Elo:(-?[\d.]+|nan|-?inf)\[(\S+?),(\S+?)\] LOS:(\S+?)%")

Statistics = dict[str, float | None]


@dataclass(frozen=True, slots=True)
class Difference:
    run_id: str
    quantity: str
    dump: object
    arbiter: object

    def line(self) -> str:
        return f"  {self.run_id} {self.quantity}: dump {self.dump}, Arbiter {self.arbiter}"


@dataclass(slots=True)
class CheckReport:
    runs: int = 0
    values: int = 0
    missing: list[str] = field(default_factory=list)  # finished runs not imported
    differences: list[Difference] = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [
            f"check: {self.runs:,} finished runs, {self.values:,} values compared, "
            f"{len(self.differences):,} differences"
        ]
        lines += [d.line() for d in self.differences[:SHOWN_DIFFERENCES]]
        if len(self.differences) > SHOWN_DIFFERENCES:
            lines.append(f"  ... and {len(self.differences) - SHOWN_DIFFERENCES:,} more")
        if self.missing:
            lines.append(f"  {len(self.missing):,} finished runs not imported (see skipped)")
        return lines


def check_import(
    storage: Storage, runs: CollectionFile, actions: CollectionFile | None
) -> CheckReport:
    messages = _finished_messages(actions) if actions is not None else {}
    report = CheckReport()
    batch: list[tuple[str, dict[str, Any]]] = []
    for run_id, document in _finished_runs(runs):
        batch.append((run_id, document))
        if len(batch) >= BATCH:
            _check_batch(storage, batch, messages, report)
            batch = []
    _check_batch(storage, batch, messages, report)
    return report


def _finished_runs(file: CollectionFile) -> Iterator[tuple[str, dict[str, Any]]]:
    with DocumentStream(file) as stream:
        try:
            for document, _ in stream:
                run_id = object_id_text(document.get("_id"))
                args = mapping(document.get("args"))
                if run_id and document.get("finished") and args and "spsa" not in args:
                    yield run_id, document
        except BadDocument:
            return  # the import reported where the file stops


def _finished_messages(file: CollectionFile) -> dict[str, str]:
    found: dict[str, str] = {}
    with DocumentStream(file) as stream:
        try:
            for document, _ in stream:
                run_id = object_id_text(document.get("run_id"))
                message = document.get("message")
                if document.get("action") == "finished_run" and run_id and isinstance(message, str):
                    found[run_id] = message
        except BadDocument:
            pass
    return found


def _check_batch(
    storage: Storage,
    batch: list[tuple[str, dict[str, Any]]],
    messages: dict[str, str],
    report: CheckReport,
) -> None:
    if not batch:
        return
    with storage.read() as tx:
        stored = {run.id: run for run in tx.runs.get_many([run_id for run_id, _ in batch])}
    for run_id, document in batch:
        run = stored.get(run_id)
        if run is None:
            report.missing.append(run_id)
            continue
        report.runs += 1
        ours = arbiter_statistics(run)
        if _inputs_of_run(run) == _inputs_of_document(document):
            # The same pure functions of the same numbers: Arbiter's values are
            # the dump's (an SPRT estimate costs about a millisecond; a check of
            # 100,000 runs saves minutes). The stored LLR is still compared.
            theirs_all = {**ours, "llr": _stored_llr(document)} if "llr" in ours else ours
        else:
            theirs_all = dump_statistics(document)
        for quantity, theirs in theirs_all.items():
            report.values += 1
            if not _close(theirs, ours[quantity]):
                report.differences.append(Difference(run_id, quantity, theirs, ours[quantity]))
        if run_id in messages:
            report.values += 1
            _compare_message(run_id, messages[run_id], ours, report)


def arbiter_statistics(run: RunRecord) -> Statistics:
    """Elo, its 95% interval, LOS (and LLR for an SPRT) as Arbiter's pages show them."""
    sprt = run.args.sprt
    if sprt is None:
        return _fixed(elo_counts(run))
    found = sprt_elo_of(run, sprt)
    counts = sprt_results(
        str(sprt["elo_model"]), run.wins, run.losses, run.draws, pentanomial_of(run)
    )
    values: Statistics = (
        {"elo": None, "ci_low": None, "ci_high": None, "los": None}
        if found is None
        else {"elo": found.elo, "ci_low": found.ci[0], "ci_high": found.ci[1], "los": found.los}
    )
    values["llr"] = _llr(sprt, counts)
    return values


def dump_statistics(document: dict[str, Any]) -> Statistics:
    """The same quantities from the dump document: its stored LLR, and the
    estimates of its own counts."""
    results = mapping(document.get("results"))
    wins, losses, draws = (integer(results.get(key)) for key in ("wins", "losses", "draws"))
    raw = results.get("pentanomial")
    pentanomial = [integer(n) for n in raw] if isinstance(raw, list) and len(raw) == 5 else None
    sprt = mapping(document["args"]).get("sprt")
    if not isinstance(sprt, dict):
        return _fixed([losses, draws, wins] if pentanomial is None else pentanomial)
    model = str(sprt.get("elo_model", "BayesElo"))
    counts = sprt_results(model, wins, losses, draws, pentanomial)
    try:
        found = sprt_elo(
            counts,
            number(sprt.get("elo0")),
            number(sprt.get("elo1")),
            model,
            alpha=number(sprt.get("alpha"), 0.05),
            beta=number(sprt.get("beta"), 0.05),
            ldw=[losses, draws, wins],
        )
        values: Statistics = {
            "elo": found.elo,
            "ci_low": found.ci[0],
            "ci_high": found.ci[1],
            "los": found.los,
        }
    except (ValueError, ZeroDivisionError):
        values = {"elo": None, "ci_low": None, "ci_high": None, "los": None}
    values["llr"] = _stored_llr(document)
    return values


def _inputs_of_run(run: RunRecord) -> tuple[Any, ...]:
    """What the statistics of an imported run are computed from."""
    sprt = run.args.sprt
    ldw = (run.losses, run.draws, run.wins)
    if sprt is None:
        return ("fixed", tuple(elo_counts(run)))
    model = str(sprt["elo_model"])
    counts = sprt_results(model, run.wins, run.losses, run.draws, pentanomial_of(run))
    parameters = (float(sprt[key]) for key in ("elo0", "elo1", "alpha", "beta"))
    return ("sprt", model, *parameters, tuple(counts), ldw)


def _inputs_of_document(document: dict[str, Any]) -> tuple[Any, ...]:
    """The same numbers as the dump document holds them."""
    results = mapping(document.get("results"))
    wins, losses, draws = (integer(results.get(key)) for key in ("wins", "losses", "draws"))
    raw = results.get("pentanomial")
    pentanomial = [integer(n) for n in raw] if isinstance(raw, list) and len(raw) == 5 else None
    sprt = mapping(document["args"]).get("sprt")
    if not isinstance(sprt, dict):
        return ("fixed", tuple([losses, draws, wins] if pentanomial is None else pentanomial))
    model = str(sprt.get("elo_model", "BayesElo"))
    counts = sprt_results(model, wins, losses, draws, pentanomial)
    parameters = (
        number(sprt.get("elo0")),
        number(sprt.get("elo1")),
        number(sprt.get("alpha"), 0.05),
        number(sprt.get("beta"), 0.05),
    )
    return ("sprt", model, *parameters, tuple(counts), (losses, draws, wins))


def _stored_llr(document: dict[str, Any]) -> float | None:
    stored = mapping(mapping(document["args"]).get("sprt")).get("llr")
    return (
        float(stored) if isinstance(stored, int | float) and not isinstance(stored, bool) else None
    )


def _fixed(counts: list[int]) -> Statistics:
    try:
        found = fixed_games_elo(counts)
    except (ValueError, ZeroDivisionError):
        return {"elo": None, "ci_low": None, "ci_high": None, "los": None}
    return {"elo": found.elo, "ci_low": found.ci[0], "ci_high": found.ci[1], "los": found.los}


def _llr(sprt: SprtState, counts: list[int]) -> float | None:
    try:
        return llr(str(sprt["elo_model"]), float(sprt["elo0"]), float(sprt["elo1"]), counts)
    except (ValueError, ZeroDivisionError):
        return None


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= TOLERANCE


def _compare_message(run_id: str, message: str, ours: Statistics, report: CheckReport) -> None:
    """The message's numbers against Arbiter's printed as the reference prints them."""
    found = _MESSAGE.search(message)
    if found is None:
        return
    elo, low, high, los = ours["elo"], ours["ci_low"], ours["ci_high"], ours["los"]
    if elo is None or low is None or high is None or los is None:
        printed = "no estimate"
    else:
        printed = estimate_text(elo, low, high, los)
    if _zero_unsigned(found[0]) != _zero_unsigned(printed):
        report.differences.append(Difference(run_id, "finished_run message", found[0], printed))


def _zero_unsigned(printed: str) -> str:
    """Results even on both sides put an estimate at 0, give or take a trace of
    rounding that falls on either side, differently here and in the reference
    (whose root finder is SciPy's): "-0.00" and "0.00" are the same zero."""
    return re.sub(r"(?<![\d.])-0\.00(?!\d)", "0.00", printed)
