"""The itp refresh (reference `update_itp`/`calc_itp`) and the order it gives runs,
against hand-worked values of the reference's formulas."""

import threading

from arbiter.domain.accounts import User
from arbiter.domain.runs.registry import Change
from arbiter.domain.runs.service import Runs
from arbiter.storage import Storage
from arbiter.storage.records import evolve
from tests.domain.runs.support import Clock, approved_run, make_user, take_task, worker

# LTC 60+0.6 is six STC games: 100 × 6^0.774, × 36/(36 + 2²) for a user with
# two runs that have workers, × (1 + 0) without games.
LTC_K2 = 360.1899385914113


def stored_itp(storage: Storage, run_id: str) -> float:
    with storage.read() as tx:
        run = tx.runs.get(run_id)
    assert run is not None
    return run.args.itp


def set_llr(runs: Runs, run_id: str, llr: float) -> None:
    """As if the run's results had brought its LLR there."""
    with runs.context.locked(run_id) as state:
        assert state is not None
        spec = evolve(state.run.args, sprt={**state.run.args.sprt, "llr": llr})
        runs.context.commit(state, Change(evolve(state.run, args=spec)))


def picks(runs: Runs, user: User, count: int) -> list[str]:
    """The runs `count` new 4-core machines are given, one after another."""
    return [
        take_task(runs, user, worker(user.username, key=f"{n:04x}"), f"10.1.0.{n}")["run"]["_id"]
        for n in range(count)
    ]


def test_itp_and_the_order_it_gives(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    bob = make_user(storage, "bob")
    a1 = approved_run(runs, alice, root, repo_url)
    a2 = approved_run(runs, alice, root, repo_url, tc="60+0.6")
    b1 = approved_run(runs, bob, root, repo_url, sprt={"elo0": 0.5, "elo1": 2.5})
    # Every run at itp 100 without cores: ties, taken in submission order.
    assert picks(runs, alice, 2) == [a1, a2]
    set_llr(runs, b1, 2.5)

    assert runs.refresh_rates() == 3
    # alice: two runs with workers, so both get 36/40, even one that had none.
    assert stored_itp(storage, a1) == 90.0  # 100 × 36/40
    assert stored_itp(storage, a2) == LTC_K2  # not rounded: 360.19 would be
    assert stored_itp(storage, b1) == 120.0  # 100 × (1 + 0.1 + 0.1): LLR > 2, elo0 > 0
    assert runs.refresh_rates() == 0  # the same inputs give the same floats

    # (cores + 2)/itp, runs without cores first. B1 has none (2/120); then A2
    # (6/360.19 = 0.0167 ... 18/360.19 = 0.04997) until B1 at 4 cores (6/120 =
    # 0.05) is lower; A2 at 20 (22/360.19 = 0.0611) once B1 has 8 (10/120 =
    # 0.0833); A1 at 4 (6/90 = 0.0667) before A2 at 24 (26/360.19 = 0.0722).
    bob_order = [b1, a2, a2, a2, a2, b1, a2, a1]
    assert picks(runs, bob, 8) == bob_order


def test_a_hair_more_throughput_is_not_rounded_away(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage
) -> None:
    first = approved_run(runs, alice, root, repo_url)
    second = approved_run(runs, alice, root, repo_url, throughput=100.0004)
    runs.refresh_rates()
    assert stored_itp(storage, second) == 100.0004
    # 2/100.0004 < 2/100, as in the reference; at 3 decimals the two would tie
    # and the first submitted would win.
    assert picks(runs, alice, 1) == [second]
    assert stored_itp(storage, first) == 100.0


def test_restart_works_itp_out_afresh(
    runs: Runs, alice: User, root: User, repo_url: str, storage: Storage, clock: Clock
) -> None:
    run_id = approved_run(runs, alice, root, repo_url)
    take_task(runs, alice, worker())
    with storage.write() as tx:
        run = tx.runs.get(run_id)
        assert run is not None
        tx.runs.save(evolve(run, args=evolve(run.args, itp=1.0)))  # saved by older code
    again = Runs(storage, task_gate=threading.Semaphore(5), clock=clock)
    again.restore()
    state = again.context.registry.get(run_id)
    assert state is not None
    assert state.run.args.itp == 97.2972972972973  # 100 × 36/37
    assert stored_itp(storage, run_id) == 97.2972972972973
