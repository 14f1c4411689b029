"""One task: cadence of reports, SPRT batch boundaries, stops, SPSA, PGN, bench checks.

The match is replaced by a scripted one (results decided in advance), so
these tests are about what the task reports and when.
"""

import dataclasses
import io
import threading
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import chess
import pytest

from arbiter.worker.assignment import Assignment, parse_assignment
from arbiter.worker.bench import BenchResult
from arbiter.worker.control import Control
from arbiter.worker.engines import BuiltEngine, EngineCache
from arbiter.worker.errors import FatalError, RunError, WorkerError
from arbiter.worker.match import (
    EngineSetup,
    EngineStartError,
    Fault,
    GameRecord,
    GameRules,
    Match,
    MatchError,
    MatchSetup,
    Opening,
    PairJob,
    PairOutcome,
    UnknownOption,
    parse_time_control,
)
from arbiter.worker.status import StatusLine
from arbiter.worker.task import (
    Measured,
    TaskContext,
    _measure,
    _play_games,
    _play_spsa,
    _Progress,
    engine_options,
    games_at_once,
    is_chess960_book,
    report_every_pairs,
    spsa_batch_pairs,
    task_pgn,
)
from tests.worker.fakes import FakeServer, task_reply, worker_config
from tests.worker.support import LOCAL_REPOS

BOOK = [Opening(chess.STARTING_FEN, ("e2e4",)), Opening(chess.STARTING_FEN, ("d2d4",))]


def record(result: str, white: str, fault: Fault | None = None) -> GameRecord:
    return GameRecord(
        white=white,
        black="Base" if white == "New" else "New",
        opening=BOOK[0],
        moves=(),
        result=result,
        termination="test",
        fault=fault,
        fault_white=False,
        chess960=False,
        duration=0.1,
        thinking=0.09,
        detail="a1a8" if fault is Fault.ILLEGAL else "",
    )


WIN_WIN = (record("1-0", "New"), record("0-1", "Base"))
ILLEGAL = (record("1-0", "New"), record("1-0", "Base", Fault.ILLEGAL))


class ScriptedMatch(Match):
    """Yields pre-decided pairs; optionally sets the abort event after some."""

    def __init__(
        self,
        pairs: Sequence[tuple[GameRecord, GameRecord]],
        abort_after: int = -1,
        fail_after: int = -1,
        failure: Exception | None = None,
    ) -> None:
        tc = parse_time_control("N=1")
        engine = EngineSetup("x", ("true",), Path(), {}, tc)
        super().__init__(MatchSetup(engine, engine, 1, GameRules(None)))
        self.pairs = list(pairs)
        self.abort_after = abort_after
        self.fail_after = fail_after
        self.failure = failure or EngineStartError("Base#1: cannot start ./stockfish")
        self.jobs: list[list[PairJob]] = []

    def play(
        self, jobs: Sequence[PairJob], abort: threading.Event
    ) -> Generator[PairOutcome, None, None]:
        self.jobs.append(list(jobs))
        for job in jobs:
            if abort.is_set():
                return
            if self.fail_after == job.index:
                raise MatchError(self.failure)
            yield PairOutcome(job, self.pairs.pop(0))
            if self.abort_after == job.index + 1:
                abort.set()


def context(tmp_path: Path, server: FakeServer) -> TaskContext:
    return TaskContext(
        client=server.client(),
        config=worker_config(tmp_path),
        engines=EngineCache(tmp_path / "engines", None, 1, policy=LOCAL_REPOS),
        control=Control(),
        status=StatusLine(io.StringIO(), interactive=False),
        books_dir=tmp_path / "books",
        nets_dir=tmp_path / "nets",
    )


def reporting_server(alive: bool = True, spsa: bool = False) -> FakeServer:
    def handler(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/api/request_spsa":
            new, base = [{"name": "A", "value": 5.0}], [{"name": "A", "value": 3.0}]
            return {"w_params": new, "b_params": base, "sig": 42, "task_alive": True}
        return {"task_alive": alive}

    return FakeServer(handler)


def updates(server: FakeServer) -> list[dict[str, Any]]:
    return [body for path, body in server.calls if path == "/api/update_task"]


def assignment(**kw: Any) -> Assignment:
    return parse_assignment(task_reply(**kw))


def test_fixed_games_report_at_the_cadence_and_at_the_end(tmp_path: Path) -> None:
    server = reporting_server()
    ctx = context(tmp_path, server)
    a = assignment(num_games=20, tc="N=320000")  # ~3 LTC games per game: 12 games a report
    progress = _Progress(a)
    _play_games(ctx, progress, ScriptedMatch([WIN_WIN] * 10), BOOK)
    assert [u["stats"]["wins"] for u in updates(server)] == [12, 20]
    assert updates(server)[-1]["stats"]["pentanomial"] == [0, 0, 0, 0, 10]
    assert isinstance(ctx.status.stream, io.StringIO)
    assert "games 20/20" in ctx.status.stream.getvalue()


def test_the_games_nps_goes_with_the_reports_once_enough_was_searched(tmp_path: Path) -> None:
    """Each game searched 6 s at 1.2 Mnps on 2 threads: after 4 games (24 s of
    search) the reports carry 600,000 nps per thread, set once for the task."""
    server = reporting_server()
    ctx = context(tmp_path, server)
    a = assignment(num_games=20, tc="N=320000", threads=2)
    timed = dataclasses.replace(WIN_WIN[0], nodes=7_200_000, search_ms=6000)
    pair = (timed, dataclasses.replace(WIN_WIN[1], nodes=7_200_000, search_ms=6000))
    _play_games(ctx, _Progress(a), ScriptedMatch([pair] * 10), BOOK)
    assert [u["worker_info"]["game_nps"] for u in updates(server)] == [600_000.0, 600_000.0]


def test_sprt_reports_only_whole_batches(tmp_path: Path) -> None:
    server = reporting_server()
    ctx = context(tmp_path, server)
    a = assignment(num_games=32, sprt={"batch_size": 4})
    match = ScriptedMatch([WIN_WIN] * 16, abort_after=14)  # stopped after 14 pairs
    _play_games(ctx, _Progress(a), match, BOOK)
    pairs = [sum(u["stats"]["pentanomial"]) for u in updates(server)]
    assert pairs == [8, 12]  # every two batches, then the last whole batch


def test_the_status_line_shows_the_runs_llr_after_each_report(tmp_path: Path) -> None:
    """The task comes with the LLR of its start; each report brings the run's
    LLR now, and the status line follows it."""
    llrs = iter([0.75, 1.5])
    server = FakeServer(lambda _p, _b: {"task_alive": True, "llr": next(llrs)})
    ctx = context(tmp_path, server)
    sprt = {"batch_size": 4, "llr": 0.0, "lower_bound": -2.94, "upper_bound": 2.94}
    progress = _Progress(assignment(num_games=32, sprt=sprt))
    _play_games(ctx, progress, ScriptedMatch([WIN_WIN] * 16), BOOK)
    shown = ctx.status.stream.getvalue()  # type: ignore[attr-defined]
    assert "LLR 0.75 [-2.94, 2.94]" in shown
    assert "LLR 1.50 [-2.94, 2.94]" in shown
    assert progress.sprt_llr == (1.5, -2.94, 2.94)


def test_the_server_can_end_the_task(tmp_path: Path) -> None:
    server = reporting_server(alive=False)
    ctx = context(tmp_path, server)
    a = assignment(num_games=40, sprt={"batch_size": 2})
    progress = _Progress(a)
    _play_games(ctx, progress, ScriptedMatch([WIN_WIN] * 20), BOOK)
    assert len(updates(server)) == 1
    assert len(progress.outcomes) == 4


def test_an_illegal_move_is_reported_then_stops_the_run(tmp_path: Path) -> None:
    server = reporting_server()
    ctx = context(tmp_path, server)
    a = assignment(num_games=20)
    with pytest.raises(RunError, match="illegal move 'a1a8'"):
        _play_games(ctx, _Progress(a), ScriptedMatch([WIN_WIN, ILLEGAL]), BOOK)
    assert updates(server)[-1]["stats"]["wins"] == 3


def test_a_broken_match_keeps_the_games_played_and_fails_the_task(tmp_path: Path) -> None:
    server = reporting_server()
    ctx = context(tmp_path, server)
    a = assignment(num_games=40)
    with pytest.raises(WorkerError, match="cannot start"):
        _play_games(ctx, _Progress(a), ScriptedMatch([WIN_WIN] * 20, fail_after=3), BOOK)
    assert updates(server)[-1]["stats"]["wins"] == 6
    unknown = ScriptedMatch([], fail_after=0, failure=UnknownOption("New#1 has no 'Contempt'"))
    with pytest.raises(RunError, match="Contempt"):
        _play_games(ctx, _Progress(a), unknown, BOOK)


def test_faults_go_to_the_event_log_sparingly(tmp_path: Path) -> None:
    server = reporting_server()
    ctx = context(tmp_path, server)
    crashes = (record("0-1", "New", Fault.CRASH), record("1-0", "Base", Fault.TIME))
    _play_games(ctx, _Progress(assignment(num_games=10)), ScriptedMatch([crashes] * 5), BOOK)
    logs = [body["message"] for path, body in server.calls if path == "/api/worker_log"]
    assert len(logs) == 4  # faults 1, 2, 4 and 8 of 10
    assert logs[0] == "Base: test (1 so far in this task)"  # the faulty side: black here
    assert logs[-1].endswith("(8 so far in this task)")


def test_openings_follow_the_task_start(tmp_path: Path) -> None:
    ctx = context(tmp_path, reporting_server())
    match = ScriptedMatch([WIN_WIN] * 3)
    _play_games(ctx, _Progress(assignment(num_games=6, start=10)), match, BOOK * 5)
    assert [job.index for job in match.jobs[0]] == [0, 1, 2]


def test_spsa_batches(tmp_path: Path) -> None:
    server = reporting_server(spsa=True)
    ctx = context(tmp_path, server)
    a = assignment(num_games=12, spsa={"iter": 0}, tc="N=640000")  # 2 pairs per batch
    match = ScriptedMatch([WIN_WIN] * 6)
    _play_spsa(ctx, _Progress(a), match, BOOK)
    assert server.paths().count("/api/request_spsa") == 3
    reports = updates(server)
    assert [u["spsa"] for u in reports] == [
        {"wins": 4, "losses": 0, "draws": 0, "num_games": 4, "sig": 42}
    ] * 3
    assert [u["stats"]["wins"] for u in reports] == [4, 8, 12]
    job = match.jobs[0][0]
    assert (job.new_options, job.base_options) in (
        ({"A": "5"}, {"A": "3"}),
        ({"A": "6"}, {"A": "3"}),
    )


def test_the_pgn_holds_the_reported_games_in_order(tmp_path: Path) -> None:
    ctx = context(tmp_path, reporting_server())
    a = assignment(num_games=4, start=100)
    progress = _Progress(a)
    _play_games(ctx, progress, ScriptedMatch([WIN_WIN] * 2), BOOK)
    text = task_pgn(ctx, progress)
    assert text.count("[Event ") == 4
    assert '[Round "101"]' in text
    assert '[Round "104"]' in text
    assert f"/tests/view/{a.run_id}" in text


def test_cadence_and_options() -> None:
    assert report_every_pairs(assignment(sprt={"batch_size": 8}), 4) == 16
    assert report_every_pairs(assignment(tc="60+0.6"), 8) == 16  # 4 LTC games per slot
    assert report_every_pairs(assignment(tc="10+0.1"), 8) == 96
    assert spsa_batch_pairs(assignment(tc="10+0.1"), 8) == 48
    assert games_at_once(8, 3) == 2
    assert games_at_once(1, 4) == 1
    assert engine_options("Hash=64 Threads=2", 1, False) == {"Hash": "64", "Threads": "2"}
    assert engine_options("Hash=64", 2, True) == {
        "Hash": "64",
        "Threads": "2",
        "UCI_Chess960": "true",
    }
    assert is_chess960_book("UHO_FRC_v1.epd")
    assert is_chess960_book("dfrc960.pgn")
    assert not is_chess960_book("UHO_Lichess_4852_v1.epd")


# ---------------------------------------------------------------- bench checks


def fake_bench(tmp_path: Path, name: str, nodes: int, nps: int) -> BuiltEngine:
    path = tmp_path / name
    path.write_text(
        f'#!/bin/sh\n[ "$1" = bench ] && echo "Nodes searched : {nodes}" >&2 '
        f'&& echo "Nodes/second : {nps}" >&2\nexit 0\n'
    )
    path.chmod(0o755)
    return BuiltEngine("c" * 40, path)


def test_signatures_and_speed(tmp_path: Path) -> None:
    ctx = context(tmp_path, reporting_server())
    ctx.nets_dir.mkdir()
    new, base = (
        fake_bench(tmp_path, "new", 111, 900_000),
        fake_bench(tmp_path, "base", 222, 900_000),
    )
    good = assignment(new_signature="111", base_signature="222")
    assert _measure(ctx, good, new, base) == 900_000.0
    assert ctx.client.worker_info.nps == 900_000.0
    with pytest.raises(RunError, match="Wrong bench in New-bbbbbbbb: expected 112 nodes, got 111"):
        _measure(ctx, assignment(new_signature="112"), new, base)
    slow = fake_bench(tmp_path, "slow", 5, 1000)
    with pytest.raises(FatalError, match="too slow"):
        _measure(ctx, assignment(tc="10+0.1", new_tc="10+0.1"), slow, slow)


def test_fixed_nodes_without_signatures_bench_quickly_once(tmp_path: Path) -> None:
    ctx = context(tmp_path, reporting_server())
    ctx.nets_dir.mkdir()
    slow = fake_bench(tmp_path, "slow", 5, 1000)
    assert _measure(ctx, assignment(), slow, slow) == 1000  # any speed will do
    assert ctx.benches == {}  # not a signature bench
    gone = BuiltEngine("e" * 40, tmp_path / "gone")
    assert _measure(ctx, assignment(), gone, gone) == 1000  # measured once per process


def test_signatures_are_benched_once_per_build(tmp_path: Path) -> None:
    ctx = context(tmp_path, reporting_server())
    missing = BuiltEngine("d" * 40, tmp_path / "gone")
    ctx.benches[missing.path] = Measured(BenchResult(1, 700_000.0), at=0.0)
    assert _measure(ctx, assignment(base_signature="1"), missing, missing) == 700_000.0
