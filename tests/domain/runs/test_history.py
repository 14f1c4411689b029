"""The results history the run page charts: recorded with each result, thinned, durable."""

import itertools

from arbiter.domain.accounts import User
from arbiter.domain.runs import history
from arbiter.domain.runs.documents import new_run_record, run_view
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.records import RunRecord, evolve
from arbiter.storage.run_spec import RunSpec, spec_document
from tests.domain.runs.support import T0, approved_run, pairs, take_task, worker


def fixed_run() -> RunRecord:
    spec = RunSpec(tc="10+0.1", threads=1, num_games=100_000, new_tag="patch")
    return new_run_record("0" * 24, "alice", spec, T0)


def played(run: RunRecord, pairs_count: int) -> RunRecord:
    """The run after `pairs_count` drawn pairs in all."""
    return evolve(run, draws=2 * pairs_count, pentanomial=(0, 0, pairs_count, 0, 0))


def test_a_run_without_results_has_no_points() -> None:
    assert history.points(fixed_run()) == []


def test_each_update_adds_a_point_with_the_results() -> None:
    run = fixed_run()
    for count in (1, 2, 3):
        run = history.record(played(run, count))
    points = history.points(run)
    assert [p.games for p in points] == [2, 4, 6]
    assert points[-1].pentanomial == (0, 0, 3, 0, 0)
    assert points[-1].llr is None


def test_the_history_stays_small_and_spans_the_whole_run() -> None:
    run = fixed_run()
    for count in range(1, 5001):
        run = history.record(played(run, count))
    points = history.points(run)
    assert history.MAX_POINTS // 2 <= len(points) <= history.MAX_POINTS
    assert points[0].games == 2
    assert points[-1].games == 10_000
    games = [p.games for p in points]
    assert games == sorted(games)
    gaps = [b - a for a, b in itertools.pairwise(games[:-1])]  # the last point is the latest
    assert max(gaps) <= 2 * min(gaps)  # evenly spread, give or take one thinning


def test_a_repeated_total_replaces_the_last_point() -> None:
    run = history.record(played(fixed_run(), 1))
    run = history.record(played(run, 1))
    assert [p.games for p in history.points(run)] == [2]


def test_a_purge_forgets_points_beyond_the_remaining_games() -> None:
    run = fixed_run()
    for count in range(1, 11):
        run = history.record(played(run, count))
    run = history.record(played(run, 4))
    assert [p.games for p in history.points(run)] == [2, 4, 6, 8]


def test_the_history_is_kept_out_of_the_args_and_the_api_view() -> None:
    run = history.record(played(fixed_run(), 1))
    assert run.results_history is not None
    assert "results_history" not in spec_document(run.args)
    assert "results_history" not in run_view(run)["args"]


def test_an_update_that_fixes_no_point_keeps_the_stored_history_object() -> None:
    """Storage writes a column only when its value is a new object: most result
    updates of a long run must not rewrite the history."""
    run = fixed_run()
    for count in range(1, 201):
        run = history.record(played(run, count))
    assert run.results_history is not None
    step, fixed_points = run.results_history["step"], run.results_history["points"]
    assert step > history.FIRST_STEP  # thinned: points are now `step` games apart
    due = fixed_points[-1][0] + step
    assert due > 400 + 2  # at least one update below comes before the point is due
    kept = run
    for games in range(400 + 2, due, 2):
        kept = history.record(played(kept, games // 2))
        assert kept.results_history is run.results_history
    fixed = history.record(played(kept, due // 2))
    assert fixed.results_history is not run.results_history
    assert history.points(fixed)[-1].games == due


def test_the_latest_point_follows_the_run_without_being_stored() -> None:
    run = history.record(played(fixed_run(), 1))
    run = history.record(played(run, 2))
    run = history.record(played(run, 3))  # 6 games: 2 past the last fixed point, due
    later = played(run, 4)  # not recorded: the latest point is derived from the run
    assert [p.games for p in history.points(later)] == [2, 4, 6, 8]
    assert history.points(later)[-1].pentanomial == (0, 0, 4, 0, 0)


def test_update_task_stores_a_point_with_the_llr(
    runs: Runs, storage: Storage, alice: User, root: User, repo_url: str
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 2})
    task_id = take_task(runs, alice, worker())["task_id"]
    runs.ingest.update_task(worker(), run_id, task_id, pairs(ld=3, dd=7, wd=5, ww=1))
    with storage.read() as tx:
        run = tx.runs.get(run_id)
    assert run is not None
    (point,) = history.points(run)
    assert point.games == 32
    assert point.llr == round(run.args.sprt["llr"], 4)
