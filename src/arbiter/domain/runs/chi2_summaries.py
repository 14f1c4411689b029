"""A finished run's workers' χ² summary, kept in the database.

Scoring a run's workers (the χ² of homogeneity and a residual each) sums every
good task per worker and scores each worker: tens of milliseconds for a run of
thousands of machines. A finished run's results no longer change, so its
summary is computed once and kept with a stamp of the results it came from
(a purge or a modify changes the stamp, and the next view computes it anew):

- live operation stores a run's summary on the run's first view after it
  finished (`stored_or_computed`);
- an import stores the summaries of its large runs at once (`score_large_runs`),
  so the first view of an imported history's biggest runs reads one row;

and both give the same χ² as summing the tasks on every view. A live run's
χ² moves with every result and is not kept here (queries.Chi2Cache).
Runs in the threadpool.
"""

import math
from typing import Any

from arbiter.stats.purge import Chi2Result, chi2_residuals
from arbiter.storage import Storage, Tx
from arbiter.storage.base import StoredChi2
from arbiter.storage.records import RunRecord

# An import scores ahead the finished runs with at least this many tasks; a
# smaller run's first view scores it in a few milliseconds.
LARGE_RUN_TASKS = 1000


def stamp_of(run: RunRecord) -> str:
    """What changes whenever the run's games do: an update moves the last
    update, a purge the totals."""
    pentanomial = ",".join(str(count) for count in run.pentanomial)
    return f"{run.last_updated!r}:{run.wins}:{run.losses}:{run.draws}:{pentanomial}"


def to_document(result: Chi2Result) -> dict[str, Any]:
    """JSON-ready; an infinite residual (a worker beyond all doubt) is null."""
    return {
        "chi2": result.chi2,
        "dof": result.dof,
        "p": result.p,
        "residual": {k: None if math.isinf(z) else z for k, z in result.residual.items()},
        "excluded": sorted(result.excluded),
    }


def from_document(document: dict[str, Any]) -> Chi2Result:
    residual = {k: math.inf if z is None else float(z) for k, z in document["residual"].items()}
    return Chi2Result(
        chi2=float(document["chi2"]),
        dof=int(document["dof"]),
        p=float(document["p"]),
        residual=residual,
        excluded=frozenset(document["excluded"]),
    )


def computed(tx: Tx, run_id: str) -> Chi2Result:
    """The χ² from the workers' totals, summed by the database."""
    return chi2_residuals(tx.tasks.worker_totals(run_id))


def _current(tx: Tx, run: RunRecord) -> StoredChi2 | None:
    """What is kept for the run, if it was computed from its current results."""
    stored = tx.chi2.get(run.id)
    return stored if stored is not None and stored.stamp == stamp_of(run) else None


def kept(tx: Tx, run: RunRecord) -> Chi2Result | None:
    """The summary kept for the run's current results, if any."""
    stored = _current(tx, run)
    return None if stored is None else from_document(stored.summary)


def _keep(tx: Tx, run: RunRecord, result: Chi2Result) -> None:
    tx.chi2.put(run.id, StoredChi2(stamp_of(run), to_document(result)))


def stored_or_computed(storage: Storage, run: RunRecord) -> Chi2Result:
    """A stored run's χ²: the kept summary, or computed now (and kept, once the
    run is finished)."""
    with storage.read() as tx:
        result = kept(tx, run)
        if result is not None:
            return result
        result = computed(tx, run.id)
    if run.finished:
        with storage.write() as tx:
            _keep(tx, run, result)
    return result


def score_large_runs(storage: Storage, at_least: int = LARGE_RUN_TASKS) -> int:
    """Keep the summary of every finished run of at least `at_least` tasks that
    has none for its results; returns how many were computed. One scan of
    the tasks, then a transaction a run."""
    with storage.read() as tx:
        run_ids = tx.tasks.runs_with_tasks(at_least)
    scored = 0
    for run_id in run_ids:
        with storage.write() as tx:
            run = tx.runs.get(run_id)
            if run is None or not run.finished or _current(tx, run) is not None:
                continue
            _keep(tx, run, computed(tx, run_id))
            scored += 1
    return scored
