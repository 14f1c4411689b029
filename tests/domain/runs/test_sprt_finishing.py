"""Property: a run's SPRT advances on every accepted update exactly as the
statistics say, and the run finishes exactly when the SPRT decides, with the
matching colour; after that nothing more is counted."""

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from arbiter.domain.accounts import User
from arbiter.domain.runs.service import Runs
from arbiter.stats.sprt import sprt_results, update_sprt
from arbiter.storage import Storage
from tests.domain.runs.support import approved_run, pairs, worker


# Batches of game pairs of one task: (LL, LD, DD, WD, WW). Workers report
# whole SPRT batches; a few tasks of lopsided batches decide either way.
def batches(low: int, high: int) -> st.SearchStrategy[tuple[int, ...]]:
    """(LL, LD, DD, WD, WW) batch counts, losing pairs up to `low`, winning up to `high`."""
    sides = (low, low, 4, high, high)
    return st.tuples(*(st.integers(0, top) for top in sides)).filter(lambda p: sum(p) > 0)


patches = st.sampled_from([(4, 4), (1, 4), (0, 2)])  # even, stronger, much stronger


def replay(state: Any, totals: list[int]) -> Any:
    counts = sprt_results(state["elo_model"], 0, 0, 0, totals)
    return update_sprt(state, counts)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=patches.flatmap(lambda edge: st.lists(batches(*edge), min_size=1, max_size=25)))
def test_run_finishes_exactly_when_the_sprt_decides(
    runs: Runs, storage: Storage, alice: User, root: User, repo_url: str, steps: list[Any]
) -> None:
    run_id = approved_run(runs, alice, root, repo_url, sprt={"elo0": 0, "elo1": 5})
    try:
        check_run(runs, storage, alice, run_id, steps)
    finally:
        runs.lifecycle.delete(root, run_id)  # examples share the database: leave no live run


def check_run(runs: Runs, storage: Storage, alice: User, run_id: str, steps: list[Any]) -> None:
    with storage.read() as tx:
        expected = tx.runs.get(run_id).args.sprt  # type: ignore[union-attr]
    totals = [0] * 5
    for index, (ll, ld, dd, wd, ww) in enumerate(steps):
        info = worker(key=f"{run_id[-5:]}{index:03d}", concurrency=8)
        reply = runs.scheduler.request_task(info, alice, f"10.1.0.{index}")
        if expected["state"]:
            assert "task_id" not in reply  # a decided run hands out no work
            break
        assert "task_id" in reply, reply
        batch = int(expected["batch_size"])
        room = reply["run"]["my_task"]["num_games"] // 2 // batch
        scale = min(1.0, room / (ll + ld + dd + wd + ww))
        counts = [int(n * scale) * batch for n in (ll, ld, dd, wd, ww)]
        if sum(counts) == 0:
            continue
        answer = runs.ingest.update_task(info, run_id, reply["task_id"], pairs(*counts))
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        expected = replay(expected, totals)
        task_full = 2 * sum(counts) >= reply["run"]["my_task"]["num_games"]
        assert answer["task_alive"] is (expected["state"] == "" and not task_full)

    with storage.read() as tx:
        run = tx.runs.get(run_id)
        tasks = tx.tasks.for_run(run_id)
    assert run is not None
    assert run.pentanomial == tuple(totals)
    assert run.args.sprt["state"] == expected["state"]
    assert abs(run.args.sprt["llr"] - expected["llr"]) < 1e-9
    assert run.finished is (expected["state"] != "")
    event(f"SPRT {expected['state'] or 'running'}")
    assert run.is_green is (expected["state"] == "accepted")
    if run.finished:
        assert not any(task.active for task in tasks)
