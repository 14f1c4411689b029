"""The run page's χ² summary is computed once per change of a run's results."""

from arbiter.domain.runs.queries import Chi2Cache
from arbiter.stats.purge import Chi2Result
from arbiter.storage.records import evolve
from tests.domain.runs.support import run_record


def test_the_chi2_is_kept_while_the_results_stay_and_redone_when_they_move() -> None:
    cache = Chi2Cache(size=2, live_seconds=0.0)
    computed: list[str] = []

    def compute(label: str) -> Chi2Result:
        computed.append(label)
        return Chi2Result(chi2=float(len(computed)))

    run = run_record(id="a" * 24, last_updated=1.0, wins=3, finished=True)
    first = cache.get(run, lambda: compute("first"))
    assert cache.get(run, lambda: compute("again")) is first
    updated = evolve(run, last_updated=2.0, wins=4)  # a result came in
    assert cache.get(updated, lambda: compute("update")).chi2 == 2.0
    purged = evolve(updated, wins=1)  # a purge: the same last update, other totals
    assert cache.get(purged, lambda: compute("purge")).chi2 == 3.0
    assert computed == ["first", "update", "purge"]


def test_the_cache_holds_the_runs_viewed_last() -> None:
    cache = Chi2Cache(size=2)
    runs = [run_record(id=str(n) * 24) for n in range(3)]
    recomputed: list[int] = []

    def compute(index: int) -> Chi2Result:
        recomputed.append(index)
        return Chi2Result()

    for index, run in enumerate(runs):
        cache.get(run, lambda index=index: compute(index))  # type: ignore[misc]
    cache.get(runs[2], lambda: compute(2))
    cache.get(runs[0], lambda: compute(0))
    assert recomputed == [0, 1, 2, 0]  # the oldest went


def test_a_live_runs_chi2_is_redone_at_most_every_few_seconds() -> None:
    now = [100.0]
    cache = Chi2Cache(live_seconds=5.0, clock=lambda: now[0])
    computed: list[float] = []

    def compute() -> Chi2Result:
        computed.append(now[0])
        return Chi2Result()

    run = run_record(id="b" * 24, last_updated=1.0)
    cache.get(run, compute)
    now[0] += 4.0
    cache.get(evolve(run, last_updated=2.0, wins=2), compute)  # results moved, 4 s later
    assert computed == [100.0]
    now[0] += 2.0
    cache.get(evolve(run, last_updated=3.0, wins=3), compute)
    assert computed == [100.0, 106.0]
