"""One task, from the server's assignment to its last report (reference 2.5).

Prepare (build both engines, fetch nets and the book, bench), play the
task's game pairs with the match runner, report cumulative stats at the
reference cadence and at the end, then upload the task's PGN. Raises the
worker's exceptions for the loop to close the task with (errors.py).
Runs in the main thread; the runner's slot threads play the games.
"""

import base64
import gzip
import logging
import random
import time
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from arbiter.protocol.messages import SpsaResult
from arbiter.stats.scheduling import REFERENCE_NPS, game_duration, min_nps
from arbiter.worker.assignment import Assignment
from arbiter.worker.bench import QUICK_DEPTH, BenchResult, bench_all, engine_arch, run_bench
from arbiter.worker.books import ensure_book, openings_for_task, read_book
from arbiter.worker.client import ApiClient
from arbiter.worker.config import WorkerConfig
from arbiter.worker.control import Control
from arbiter.worker.engines import BuiltEngine, EngineCache
from arbiter.worker.errors import FatalError, RunError, WorkerError
from arbiter.worker.identity import with_game_nps, with_measurements
from arbiter.worker.match import (
    REFERENCE_RULES,
    EngineSetup,
    Fault,
    GameRules,
    Match,
    MatchError,
    MatchSetup,
    MatchStats,
    Opening,
    PairJob,
    PairOutcome,
    TimeControl,
    UnknownOption,
    game_pgn,
    parse_time_control,
)
from arbiter.worker.nets import engine_default_nets, ensure_nets
from arbiter.worker.spsa import batch_result, parse_spsa_reply
from arbiter.worker.state import StateFile, TaskProgress
from arbiter.worker.status import StatusLine, task_status
from arbiter.worker.update import SelfUpdate

log = logging.getLogger("arbiter.worker.task")

LTC = "60+0.6"  # the long time control the reporting cadence is measured against
GAMES_PER_SLOT = 4  # games per slot between fixed-games reports at LTC (reference 2.5.7)
SPEED_FRESH_SECONDS = 600.0  # a clock run re-measures the machine's speed after this
GAME_SPEED_SAMPLE_MS = 20_000  # engine search time summed before the game nps is sent


@dataclass(frozen=True, slots=True)
class Measured:
    bench: BenchResult
    at: float  # time.monotonic() of the measurement


@dataclass
class TaskContext:
    """What every task needs, built once by the loop."""

    client: ApiClient
    config: WorkerConfig
    engines: EngineCache
    control: Control
    status: StatusLine
    books_dir: Path
    nets_dir: Path
    benches: dict[Path, "Measured"] = field(default_factory=dict)  # by engine executable
    missing_nets: set[str] = field(default_factory=set)  # defaults the server does not have
    books: dict[tuple[Path, float, int, bool], list[Opening]] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    updater: SelfUpdate | None = None  # None: a newer protocol is only logged
    state: StateFile | None = None  # status.json, for `arbiter worker status`


@dataclass
class _Progress:
    """The task's results as the task thread knows them."""

    assignment: Assignment
    stats: MatchStats = field(default_factory=MatchStats)
    reported: MatchStats = field(default_factory=MatchStats)
    outcomes: list[PairOutcome] = field(default_factory=list)
    nps: float = 0.0
    faults: int = 0  # crashes, stalls and time losses so far
    nodes: int = 0  # the engines searched in this task's games
    search_ms: int = 0
    # The run's SPRT (LLR, lower, upper bound): as given with the task, then
    # as the server says after each report.
    sprt_llr: tuple[float, float, float] | None = field(init=False)

    def __post_init__(self) -> None:
        self.sprt_llr = self.assignment.sprt_llr


def run_task(ctx: TaskContext, assignment: Assignment) -> None:
    """Play and report one task; WorkerError/RunError/FatalError on failure."""
    new, base = _engines(ctx, assignment)
    ctx.nets_dir.mkdir(parents=True, exist_ok=True)  # the engines' working directory
    ensure_nets(
        ctx.client,
        ctx.nets_dir,
        ctx.missing_nets,
        required=(*assignment.base_nets, *assignment.new_nets),
        optional=(
            *engine_default_nets(new.path, ctx.nets_dir),
            *engine_default_nets(base.path, ctx.nets_dir),
        ),
    )
    chess960 = is_chess960_book(assignment.book)
    book = _book(ctx, assignment, chess960)
    nps = _measure(ctx, assignment, new, base)
    progress = _Progress(assignment, nps=nps)
    setup = _match_setup(ctx, assignment, new=new, base=base, nps=nps, chess960=chess960)
    match = Match(setup)
    try:
        if assignment.spsa:
            _play_spsa(ctx, progress, match, book)
        else:
            _play_games(ctx, progress, match, book)
    finally:
        match.close()
        # Measured on this task's engines: the next task measures its own.
        ctx.client.worker_info = with_game_nps(ctx.client.worker_info, 0.0)
    # A stopped worker (SIGTERM) uploads the games it reported, then hands the task back.
    if not assignment.spsa and progress.reported.games > 0:
        _upload_pgn(ctx, progress)
    if ctx.control.stopping.is_set():
        raise FatalError(f"worker stopped ({ctx.control.reason})")


# ---------------------------------------------------------------- preparation


def _engines(ctx: TaskContext, a: Assignment) -> tuple[BuiltEngine, BuiltEngine]:
    base = ctx.engines.engine(a.tests_repo, a.base_sha)
    new = base if a.new_sha == a.base_sha else ctx.engines.engine(a.tests_repo, a.new_sha)
    return new, base


def is_chess960_book(name: str) -> bool:
    upper = name.upper()
    return "FRC" in upper or "960" in upper


def _book(ctx: TaskContext, a: Assignment, chess960: bool) -> list[Opening]:
    path = ensure_book(ctx.client, ctx.books_dir, a.book, a.book_sri)
    key = (path, path.stat().st_mtime, a.book_depth, chess960)
    if key not in ctx.books:
        ctx.books.clear()  # one parsed book in memory is enough
        ctx.books[key] = read_book(path, 2 * a.book_depth, chess960)
    return ctx.books[key]


def _measure(ctx: TaskContext, a: Assignment, new: BuiltEngine, base: BuiltEngine) -> float:
    """Bench what needs it, check the signatures and the machine's speed; the
    machine's nodes per second.

    A build's node count never changes, so each build is benched once for
    its signature. Its speed is measured again for a clock run when the last
    measurement is older than SPEED_FRESH_SECONDS (the reference benches every
    30-minute task; our tasks can be much shorter). Only a clock run needs a
    minimum speed: a fixed node count is the same game on a slow machine, only
    later, while a clock scaled for a slow machine no longer means the same.
    A fixed-nodes run without signatures only needs the speed for the
    record: a quick bench, once per worker process.
    """
    clock = not (_tc(a.tc).is_nodes and _tc(a.new_tc).is_nodes)
    if not clock and not (a.base_signature or a.new_signature):
        if not ctx.client.worker_info.nps:
            _record_speed(ctx, run_bench(base.path, ctx.nets_dir, QUICK_DEPTH), new)
        return ctx.client.worker_info.nps
    now = time.monotonic()
    stale = [
        engine.path
        for engine in dict.fromkeys((base, new))
        if engine.path not in ctx.benches
        or (clock and now - ctx.benches[engine.path].at > SPEED_FRESH_SECONDS)
    ]
    if stale:
        for path, bench in zip(stale, bench_all(stale, ctx.nets_dir), strict=True):
            ctx.benches[path] = Measured(bench, now)
        _record_speed(ctx, ctx.benches[base.path].bench, new)
    if clock:
        _require_speed(ctx, ctx.benches[base.path].bench)
    for label, signature, engine, sha in (
        ("New", a.new_signature, new, a.new_sha),
        ("Base", a.base_signature, base, a.base_sha),
    ):
        nodes = ctx.benches[engine.path].bench.nodes
        if signature and int(signature) != nodes:
            raise RunError(
                f"Wrong bench in {label}-{sha[:8]}: expected {signature} nodes, got {nodes}"
            )
    return ctx.benches[base.path].bench.nps


def _require_speed(ctx: TaskContext, bench: BenchResult) -> None:
    floor = min_nps(ctx.config.concurrency)
    if bench.nps < floor:
        raise FatalError(
            f"this machine is too slow: {bench.nps:.0f} nps, at least {floor:.0f} needed"
        )


def _record_speed(ctx: TaskContext, bench: BenchResult, new: BuiltEngine) -> None:
    arch = engine_arch(new.path, ctx.nets_dir)
    info = with_measurements(ctx.client.worker_info, arch=arch, nps=bench.nps)
    ctx.client.worker_info = info
    log.info("bench: %d nodes, %.0f nps; %s", bench.nodes, bench.nps, arch)


def _tc(text: str) -> TimeControl:
    try:
        return parse_time_control(text)
    except ValueError as error:
        raise RunError(str(error)) from None


def parse_options(text: str) -> dict[str, str]:
    """`Name=Value` tokens of a run's options (the server checked their form)."""
    options = {}
    for token in text.split():
        name, _, value = token.partition("=")
        options[name] = value
    return options


def engine_options(text: str, threads: int, chess960: bool) -> dict[str, str]:
    options = parse_options(text)
    if not any(name.lower() == "threads" for name in options):
        options["Threads"] = str(threads)
    if chess960:
        options["UCI_Chess960"] = "true"
    return options


def _match_setup(
    ctx: TaskContext,
    a: Assignment,
    *,
    new: BuiltEngine,
    base: BuiltEngine,
    nps: float,
    chess960: bool,
) -> MatchSetup:
    factor = REFERENCE_NPS / nps if nps else 1.0
    return MatchSetup(
        new=EngineSetup(
            name=f"New-{a.new_sha[:8]}",
            command=(str(new.path),),
            cwd=ctx.nets_dir,
            options=engine_options(a.new_options, a.threads, chess960),
            tc=_tc(a.new_tc).scaled(factor),
        ),
        base=EngineSetup(
            name=f"Base-{a.base_sha[:8]}",
            command=(str(base.path),),
            cwd=ctx.nets_dir,
            options=engine_options(a.base_options, a.threads, chess960),
            tc=_tc(a.tc).scaled(factor),
        ),
        games_at_once=games_at_once(ctx.config.concurrency, a.threads),
        rules=GameRules(REFERENCE_RULES if a.adjudication else None, chess960=chess960),
    )


def games_at_once(concurrency: int, threads: int) -> int:
    return max(1, concurrency // max(1, threads))


# ---------------------------------------------------------------- cadence


def report_every_pairs(a: Assignment, slots: int) -> int:
    """Pairs between reports: two SPRT batches; otherwise about GAMES_PER_SLOT
    LTC games per slot, so short games report less often (reference 2.5.7)."""
    if a.sprt_batch_size:
        return 2 * a.sprt_batch_size
    return max(1, slots * GAMES_PER_SLOT * _ltc_ratio(a.tc) // 2)


def spsa_batch_pairs(a: Assignment, slots: int) -> int:
    """Pairs per SPSA batch: as fixed games, counting a game twice as long."""
    return max(1, slots * GAMES_PER_SLOT * _ltc_ratio(a.tc, 2.0) // 2)


def _ltc_ratio(tc_text: str, stretch: float = 1.0) -> int:
    tc = _tc(tc_text)
    clock = f"0+{tc.nodes / REFERENCE_NPS:.6f}" if tc.nodes else tc_text
    return max(1, round(game_duration(LTC) / (stretch * game_duration(clock))))


# ---------------------------------------------------------------- playing


def _pair_jobs(
    a: Assignment,
    book: list[Opening],
    first: int,
    count: int,
    *,
    new_options: Mapping[str, str] | None = None,
    base_options: Mapping[str, str] | None = None,
) -> list[PairJob]:
    """Jobs for this task's pairs `first` .. `first + count - 1`."""
    start_pair = (a.start + a.games_reported) // 2 + first
    openings = openings_for_task(book, a.run_id, start_pair, count)
    return [
        PairJob(first + n, opening, dict(new_options or {}), dict(base_options or {}))
        for n, opening in enumerate(openings)
    ]


def _pairs_left(a: Assignment) -> int:
    return max(0, a.num_games - a.games_reported) // 2


class _GameReports:
    """When a fixed-games or SPRT task reports, and what (reference 2.5.7).

    SPRT stats must always hold whole batches of pairs, so the stats at the
    last batch boundary are kept: they are what an early stop can report.
    """

    def __init__(self, ctx: TaskContext, p: _Progress, every: int) -> None:
        self.ctx = ctx
        self.p = p
        self.every = every
        self.unit = p.assignment.sprt_batch_size or 1
        self.before = sum(p.assignment.stats.pentanomial)  # pairs reported by an earlier worker
        self.total = _pairs_left(p.assignment)
        self.reportable = p.stats.copy()

    def take(self, outcome: PairOutcome) -> bool:
        """Count a pair and report when due; False when the task is over."""
        p = self.p
        p.stats.add_pair(outcome.games)
        _measure_game_speed(self.ctx, p, outcome)
        p.outcomes.append(outcome)
        _tell_faults(self.ctx, p, outcome)
        pairs = sum(p.stats.pentanomial)
        whole = (self.before + pairs) % self.unit == 0
        if whole:
            self.reportable = p.stats.copy()
        _show(self.ctx, p)
        if p.stats.illegal_moves:
            self.flush()
            raise RunError(illegal_move_message(outcome))
        due = pairs - sum(p.reported.pentanomial) >= self.every or pairs == self.total
        if due and whole and not _report(self.ctx, p, self.reportable):
            if pairs < self.total:
                log.info("the server needs no more games from task %d", p.assignment.task_id)
            return False
        return True

    def flush(self) -> None:
        """Report what can be reported, if not yet: the task is ending early."""
        _report(self.ctx, self.p, self.reportable)


def _play_games(ctx: TaskContext, p: _Progress, match: Match, book: list[Opening]) -> None:
    reports = _GameReports(ctx, p, report_every_pairs(p.assignment, match.setup.games_at_once))
    jobs = _pair_jobs(p.assignment, book, 0, reports.total)
    try:
        with closing(match.play(jobs, ctx.control.task_abort)) as outcomes:
            for outcome in outcomes:
                if not reports.take(outcome):
                    return
    except MatchError as error:
        _flush_quietly(reports)  # keep the games played before the failure
        raise match_failure(error) from None
    if ctx.control.task_abort.is_set():
        reports.flush()


def _flush_quietly(reports: _GameReports) -> None:
    try:
        reports.flush()
    except WorkerError as error:
        log.warning("could not report the games played: %s", error)


def _play_spsa(ctx: TaskContext, p: _Progress, match: Match, book: list[Opening]) -> None:
    """Batches: ask for parameters, play them, report the batch with its signature."""
    a = p.assignment
    total = _pairs_left(a)
    batch_pairs = spsa_batch_pairs(a, match.setup.games_at_once)
    played = 0
    while played < total and not ctx.control.task_abort.is_set():
        reply = ctx.client.request_spsa(a.run_id, a.task_id)
        if reply.get("task_alive") is False:
            return
        batch = parse_spsa_reply(reply, ctx.rng)
        count = min(batch_pairs, total - played)
        jobs = _pair_jobs(
            a, book, played, count, new_options=batch.new_options, base_options=batch.base_options
        )
        before = p.stats.copy()
        try:
            with closing(match.play(jobs, ctx.control.task_abort)) as outcomes:
                for outcome in outcomes:
                    p.stats.add_pair(outcome.games)
                    _measure_game_speed(ctx, p, outcome)
                    _tell_faults(ctx, p, outcome)
                    _show(ctx, p)
        except MatchError as error:
            raise match_failure(error) from None
        played += sum(p.stats.pentanomial) - sum(before.pentanomial)
        this_batch = p.stats.minus(before)
        if this_batch.games and not _report(ctx, p, p.stats, batch_result(this_batch, batch.sig)):
            return
        if this_batch.illegal_moves:
            raise RunError("an engine played an illegal move in an SPSA batch")


def _measure_game_speed(ctx: TaskContext, p: _Progress, outcome: PairOutcome) -> None:
    """Sum the engines' searches; once GAME_SPEED_SAMPLE_MS of them are in, the
    nodes per second per thread they searched at goes with every report
    (`game_nps`), set once a task: the server sets it against the bench
    figure the time control was scaled by (domain/health.py)."""
    if ctx.client.worker_info.game_nps:
        return
    for game in outcome.games:
        p.nodes += game.nodes
        p.search_ms += game.search_ms
    if p.search_ms < GAME_SPEED_SAMPLE_MS:
        return
    per_thread = 1000.0 * p.nodes / p.search_ms / max(1, p.assignment.threads)
    ctx.client.worker_info = with_game_nps(ctx.client.worker_info, round(per_thread, 1))
    log.info("the engines searched at %.0f nps per thread in this task's games", per_thread)


def _tell_faults(ctx: TaskContext, p: _Progress, outcome: PairOutcome) -> None:
    """Crashes, stalls and time losses go to the server's event log on the 1st,
    2nd, 4th, 8th... occurrence in a task, as the reference does: visible to
    the run's author without flooding the log."""
    for game in outcome.games:
        if game.fault not in (Fault.CRASH, Fault.STALL, Fault.TIME):
            continue
        p.faults += 1
        if p.faults & (p.faults - 1):
            continue
        engine = game.white if game.fault_white else game.black
        message = f"{engine}: {game.termination} ({p.faults} so far in this task)"
        log.warning(message)
        try:
            ctx.client.worker_log(message, p.assignment.run_id, p.assignment.task_id)
        except WorkerError as error:
            log.warning("worker_log failed: %s", error)


def match_failure(error: MatchError) -> WorkerError:
    """An engine without a run's option is the run's fault; anything else, this task's."""
    if isinstance(error.cause, UnknownOption):
        return RunError(str(error.cause))
    return WorkerError(f"the match could not go on: {error}")


def illegal_move_message(outcome: PairOutcome) -> str:
    for game in outcome.games:
        if game.detail:
            loser = game.black if game.result == "1-0" else game.white
            return f"{loser} played an illegal move {game.detail!r} (opening {game.opening.fen})"
    return "an engine played an illegal move"


def _report(
    ctx: TaskContext, p: _Progress, stats: MatchStats, spsa: SpsaResult | None = None
) -> bool:
    """Send cumulative stats (unless already sent); whether the task lives on."""
    if stats.games == p.reported.games and spsa is None:
        return True
    a = p.assignment
    reported = ctx.client.update_task(a.run_id, a.task_id, stats.on_top_of(a.stats), spsa)
    p.reported = stats.copy()
    if reported.llr is not None and a.sprt_llr is not None:
        p.sprt_llr = (reported.llr, a.sprt_llr[1], a.sprt_llr[2])
    _show(ctx, p, milestone=True)
    return reported.alive


def _show(ctx: TaskContext, p: _Progress, *, milestone: bool = False) -> None:
    a = p.assignment
    played = a.games_reported + p.stats.games
    stats = p.stats.on_top_of(a.stats)
    text = task_status(
        a.run_id,
        a.label,
        played=played,
        total=a.num_games,
        stats=stats,
        nps=p.nps,
        sprt_llr=p.sprt_llr,
    )
    ctx.status.show(text, milestone=milestone)
    if ctx.state is not None:
        ctx.state.progress(
            TaskProgress(
                run_id=a.run_id,
                task_id=a.task_id,
                label=a.label,
                played=played,
                total=a.num_games,
                wins=stats.wins,
                losses=stats.losses,
                draws=stats.draws,
                nps=p.nps,
                sprt_llr=p.sprt_llr,
            )
        )


# ---------------------------------------------------------------- PGN


def task_pgn(ctx: TaskContext, p: _Progress) -> str:
    """The PGN of the games the server counted: the first reported pairs, in
    completion order as reported, written in task order."""
    a = p.assignment
    event = f"Batch {a.task_id}: {a.new_tag} vs {a.base_tag}"
    site = f"{ctx.config.server}/tests/view/{a.run_id}"
    time_control = _tc(a.tc).pgn_tag()
    first_game = a.start + a.games_reported
    counted = p.outcomes[: sum(p.reported.pentanomial)]
    texts = []
    for outcome in sorted(counted, key=lambda o: o.job.index):
        for offset, game in enumerate(outcome.games):
            number = str(first_game + 2 * outcome.job.index + offset + 1)
            texts.append(
                game_pgn(game, event=event, site=site, round_=number, time_control=time_control)
            )
    return "".join(texts)


def _upload_pgn(ctx: TaskContext, p: _Progress) -> None:
    a = p.assignment
    data = gzip.compress(task_pgn(ctx, p).encode(), compresslevel=6)
    try:
        reply = ctx.client.upload_pgn(a.run_id, a.task_id, base64.b64encode(data).decode())
    except WorkerError as error:
        log.warning("PGN upload failed: %s", error)  # the games are reported; only the file is lost
        return
    if "error" not in reply:
        log.info("uploaded the PGN of task %d (%d bytes gzipped)", a.task_id, len(data))
