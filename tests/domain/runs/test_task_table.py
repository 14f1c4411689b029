"""The run page's tasks table: a stored run's page, sorted, filtered and summed
by the database, is the page the same tasks give in memory (the oracle), on
both backends; and only the page's rows are read."""

import random

import pytest

from arbiter.domain.runs import task_table
from arbiter.domain.runs.queries import chi2_of
from arbiter.domain.runs.task_table import TASKS_PER_PAGE, TaskQuery, TaskSlice
from arbiter.stats.purge import chi2_residuals
from arbiter.storage import Storage
from arbiter.storage.base import TaskLight
from arbiter.storage.records import TaskRecord
from tests.domain.runs.support import run_record, task_record

RUN = "c" * 24
NAMES = ["alice", "Bob", "bob", "carol", "Zed", "ünïcode"]
TASKS = 130  # three pages


def made_tasks() -> list[TaskRecord]:
    """Tasks of several machines per user, with ties in every sort key, a few
    purged, some without games."""
    rng = random.Random(7)
    made = []
    for task_id in range(TASKS):
        user = NAMES[task_id % len(NAMES)]
        machine = rng.randrange(3)
        concurrency = [1, 4, 16][machine]
        key = f"{machine:x}{user.encode().hex()[:7]}-{task_id % 2:04x}-0000-0000-000000000000"
        penta = [rng.randrange(4) for _ in range(5)] if task_id % 9 else [0, 0, 0, 0, 0]
        made.append(
            task_record(
                run_id=RUN,
                task_id=task_id,
                active=False,
                bad=task_id % 17 == 5,
                last_updated=float(rng.randrange(20)),
                username=user,
                worker_name=f"{user}-{concurrency}cores-{key.split('-', maxsplit=1)[0]}",
                unique_key=key,
                worker_info={"concurrency": concurrency, "modified": task_id % 11 == 0},
                wins=penta[3] + 2 * penta[4],
                losses=penta[1] + 2 * penta[0],
                draws=penta[1] + 2 * penta[2] + penta[3],
                crashes=rng.randrange(2),
                time_losses=rng.randrange(2),
                pentanomial=tuple(penta),
            )
        )
    return made


@pytest.fixture
def stored(storage: Storage) -> list[TaskRecord]:
    tasks = made_tasks()
    with storage.write() as tx:
        tx.runs.add(run_record(id=RUN, finished=True))
        tx.tasks.add_many(tasks)
    return tasks


def from_storage(storage: Storage, query: TaskQuery, residual: dict[str, float]) -> TaskSlice:
    with storage.read() as tx:
        return task_table.from_storage(tx, RUN, query, residual)


def ids(found: TaskSlice) -> list[int]:
    return [task.task_id for task in found.tasks]


QUERIES = [
    TaskQuery(sort=sort, descending=descending, page=page)
    for sort in task_table.SORTS
    for descending in (False, True)
    for page in (1, 3)
] + [
    TaskQuery(worker="BOB"),
    TaskQuery(worker="cores-1", sort="games", descending=True),
    TaskQuery(worker="0001", sort="worker"),  # the key's second group: the long name only
    TaskQuery(worker="*"),  # modified machines
    TaskQuery(worker="nobody"),
    TaskQuery(show_task=97, sort="updated"),
    TaskQuery(show_task=97, sort="residual", descending=True),
    TaskQuery(show_task=5),  # purged: the first page
    TaskQuery(show_all=True, sort="crashes", descending=True),
    TaskQuery(page=99),
    TaskQuery(sort="nonsense"),
]


@pytest.mark.parametrize("query", QUERIES, ids=repr)
def test_the_database_pages_as_memory_does(
    storage: Storage, stored: list[TaskRecord], query: TaskQuery
) -> None:
    residual = chi2_of(stored).residual
    expected = task_table.from_memory(stored, query, residual)
    found = from_storage(storage, query, residual)
    assert ids(found) == ids(expected)
    assert found.tasks == expected.tasks  # whole records, documents decoded alike
    assert (found.page, found.pages, found.total, found.sort) == (
        expected.page,
        expected.pages,
        expected.total,
        expected.sort,
    )
    assert found.bad == expected.bad


def test_pages_hold_fifty_and_cover_every_good_task(
    storage: Storage, stored: list[TaskRecord]
) -> None:
    good = [task.task_id for task in stored if not task.bad]
    seen: list[int] = []
    for page in (1, 2, 3):
        found = from_storage(storage, TaskQuery(page=page), {})
        assert len(found.tasks) == min(TASKS_PER_PAGE, len(good) - len(seen))
        seen += ids(found)
    assert seen == good
    assert [task.task_id for task in from_storage(storage, TaskQuery(), {}).bad] == [
        task.task_id for task in stored if task.bad
    ]


def test_the_workers_totals_give_the_chi2_of_the_tasks(
    storage: Storage, stored: list[TaskRecord]
) -> None:
    with storage.read() as tx:
        totals = tx.tasks.worker_totals(RUN)
    found, expected = chi2_residuals(totals), chi2_of(stored)
    assert (found.dof, found.excluded) == (expected.dof, expected.excluded)
    assert found.chi2 == pytest.approx(expected.chi2)  # summed in another order
    assert found.residual == pytest.approx(expected.residual)
    assert all(any(row) for row in totals.values())  # machines without games left out


def test_only_the_page_is_read(storage: Storage, stored: list[TaskRecord]) -> None:
    """The common page comes from a sorted, limited query: no light rows."""

    class Counting:
        def __init__(self) -> None:
            self.light = 0

    counted = Counting()
    with storage.read() as tx:
        original = tx.tasks.light_of_run

        def light(run_id: str, *, modified: bool = False) -> list[TaskLight]:
            counted.light += 1
            return original(run_id, modified=modified)

        tx.tasks.light_of_run = light  # type: ignore[method-assign]
        page = task_table.from_storage(tx, RUN, TaskQuery(sort="games", page=2), {})
        assert len(page.tasks) == TASKS_PER_PAGE
        assert counted.light == 0
        task_table.from_storage(tx, RUN, TaskQuery(sort="residual"), {})
        assert counted.light == 0  # the residual order reads each task's machine only
        task_table.from_storage(tx, RUN, TaskQuery(sort="residual", worker="u"), {})
        assert counted.light == 1
