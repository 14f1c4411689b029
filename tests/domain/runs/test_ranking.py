"""Rank order of runs against hand-worked examples of the reference's sort key:
(-priority, adjusted cores > 0, (adjusted cores + C/2) / itp), C the worker's
concurrency, a worker's previous run adjusted by C."""

from arbiter.domain.runs.ranking import (
    BOOK,
    REPOSITORY,
    RunNeeds,
    best_ranked,
    ranked,
    unsuitable,
)
from arbiter.domain.runs.registry import RunState
from arbiter.storage.records import RunRecord, evolve
from arbiter.storage.run_spec import RunSpec
from tests.domain.runs.support import run_record, worker

BASE = run_record()


def run(run_id: str, *, priority: float = 0.0, cores: int = 0, itp: float = 100.0) -> RunRecord:
    return evolve(
        BASE,
        id=run_id,
        cores=cores,
        workers=(cores + 3) // 4,
        args=RunSpec(priority=priority, itp=itp),
    )


# The itp values are the reference's for: STC k=1 (100 × 36/37), LTC 60+0.6 k=1
# (100 × 6^0.774 × 36/37), STC k=3 at 100,000 games (100 × 36/45 × 1.5) and
# STC k=1 past 200,000 games with LLR > 2 and elo0 > 0 (100 × 36/37 × 2.2).
STC_K1, LTC_K1, STC_K3_HALF, STC_K1_LLR = (
    97.2972972972973,
    389.39452820693117,
    120.0,
    214.0540540540541,
)

# Registry order; keys for an 8-core worker (C/2 = 4) whose previous run is "f".
RUNS = [
    run("a"),  # (0, no cores, 4/100 = 0.04)
    run("b", cores=16, itp=LTC_K1),  # (0, cores, 20/389.39 = 0.0514)
    run("c", priority=1, cores=64, itp=STC_K1),  # (-1, cores, 68/97.30 = 0.699): first
    run("d", cores=8, itp=STC_K1),  # (0, cores, 12/97.30 = 0.1233)
    run("e", itp=STC_K3_HALF),  # (0, no cores, 4/120 = 0.0333)
    run("f", itp=STC_K1_LLR),  # previous: 0 + 8 cores, (0, cores, 12/214.05 = 0.0561)
    run("g"),  # the same key as "a": after it, in registry order
    run("h", priority=-1, itp=500.0),  # lower priority: last whatever its share
]


def states(runs: list[RunRecord]) -> list[RunState]:
    return [RunState(r, []) for r in runs]


def ids(order: list[RunState]) -> str:
    return "".join(state.run.id for state in order)


def test_the_references_order() -> None:
    order = ranked(states(RUNS), worker(concurrency=8), "f", {})
    assert ids(order) == "ceagbfdh"


def best_id(runs: list[RunRecord], pending: dict[str, RunRecord] | None = None) -> str | None:
    best = best_ranked(states(runs), worker(concurrency=8), "f", pending or {})
    return None if best is None else best.run.id


def test_best_ranked_is_the_first_of_the_order() -> None:
    assert best_id(RUNS) == "c"
    assert best_id([r for r in RUNS if r.id != "c"]) == "e"
    assert best_id([]) is None


def test_without_a_previous_run_nothing_is_adjusted() -> None:
    # "f" has no cores then: (0, no cores, 4/214.05 = 0.0187), the best of the
    # runs without cores.
    order = ranked(states(RUNS), worker(concurrency=8), None, {})
    assert ids(order) == "cfeagbdh"


def test_decisions_of_the_batch_count() -> None:
    # The batch gave "a" 8 cores: (0, cores, 12/100 = 0.12), just before "d" (0.1233).
    pending = {"a": evolve(RUNS[0], cores=8, workers=1)}
    order = ranked(states(RUNS), worker(concurrency=8), "f", pending)
    assert ids(order) == "cegbfadh"
    # The one-pass search sees them: "e" at 16 cores (20/120 = 0.167) is
    # now behind "d" (0.1233).
    assert best_id(RUNS[3:5], {"e": run("e", cores=16, itp=STC_K3_HALF)}) == "d"


def test_half_the_machine_counts_as_given() -> None:
    # x: 10 cores of itp 100; y: 60 cores of itp 400. For 2 cores, x is further
    # below its share (11/100 = 0.11 < 61/400 = 0.1525); for 128 cores, y is
    # (74/100 = 0.74 > 124/400 = 0.31).
    pair = [run("x", cores=10), run("y", cores=60, itp=400.0)]
    assert ids(ranked(states(pair), worker(concurrency=2), None, {})) == "xy"
    assert ids(ranked(states(pair), worker(concurrency=128), None, {})) == "yx"


def test_an_itp_a_hair_higher_wins() -> None:
    # 2/100.0004 < 2/100: the reference keeps itp unrounded, so must we.
    pair = [run("p"), run("q", itp=100.0004)]
    assert ids(ranked(states(pair), worker(concurrency=4), None, {})) == "qp"


def needs(*, github_repository: bool = True, catalogue_book: bool = True) -> RunNeeds:
    return RunNeeds(
        threads=1,
        hash_new=16,
        hash_base=16,
        allowed_archs=None,
        compiler="",
        spsa_cap=None,
        scheduling_tc="10+0.1",
        sprt_batch=None,
        catalogue_book=catalogue_book,
        github_repository=github_repository,
    )


def test_the_official_worker_gets_only_what_it_can_download() -> None:
    """It fetches engines as GitHub zipballs and books from the catalogue;
    Arbiter's worker (`hosted_books`) fetches both from anywhere."""
    playable = evolve(BASE, args=RunSpec(num_games=100))
    official, arbiter = worker(hosted_books=False), worker()
    assert unsuitable(playable, needs(), official) is None
    assert unsuitable(playable, needs(github_repository=False), official) == REPOSITORY
    assert unsuitable(playable, needs(catalogue_book=False), official) == BOOK
    for other in (needs(github_repository=False), needs(catalogue_book=False)):
        assert unsuitable(playable, other, arbiter) is None


def test_needs_know_a_github_repository() -> None:
    spec = RunSpec(
        threads=1,
        new_options="Hash=16",
        base_options="Hash=16",
        tc="10+0.1",
        tests_repo="https://github.com/alice/Stockfish",
    )
    assert RunNeeds.of(spec).github_repository
    local = evolve(spec, tests_repo="file:///srv/git/engine")
    assert not RunNeeds.of(local).github_repository
