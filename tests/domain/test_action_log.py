"""The event-log page's queries: part of a name, words, either order with paging
by time, and totals counted up to a cap."""

import pytest
from sqlalchemy import Engine

from arbiter.domain.action_log import LogQuery, log_page
from arbiter.domain.errors import BadRequest
from arbiter.storage import Storage
from arbiter.storage.base import NewAction
from tests.domain.runs.support import make_user

RUN = "0" * 23 + "1"


@pytest.fixture
def storage(engine: Engine) -> Storage:
    storage = Storage(engine)
    for name in ("alice", "Malice", "bob"):
        make_user(storage, name)
    with storage.write() as tx:
        for second in range(12):
            who = ("alice", "Malice", "bob")[second % 3]
            tx.actions.add(
                NewAction(
                    time=1000.0 + second,
                    action="failed_task" if second % 2 else "new_run",
                    username=who,
                    message=f"Engine crashed at move {second}" if second % 2 else "",
                    run_id=RUN,
                    run="king-safety-abc1234",
                    worker=f"{who}-4cores-abcd",
                )
            )
    return storage


def seconds(page_entries: list[dict[str, object]]) -> list[int]:
    return [int(float(str(entry["time"]))) - 1000 for entry in page_entries]


def test_newest_first_paged_by_time_with_the_total(storage: Storage) -> None:
    first = log_page(storage, LogQuery(), per_page=5)
    assert seconds(first.entries) == [11, 10, 9, 8, 7]
    assert (first.more, first.total, first.total_capped) == (True, 12, False)
    later = log_page(storage, LogQuery(before=first.entries[-1]["time"]), per_page=5)
    assert seconds(later.entries) == [6, 5, 4, 3, 2]


def test_oldest_first_paged_the_other_way(storage: Storage) -> None:
    first = log_page(storage, LogQuery(oldest_first=True), per_page=5)
    assert seconds(first.entries) == [0, 1, 2, 3, 4]
    last = log_page(storage, LogQuery(oldest_first=True, after=1009.0), per_page=5)
    assert (seconds(last.entries), last.more) == ([10, 11], False)


def test_a_total_beyond_the_cap_is_more_than_it(storage: Storage) -> None:
    page = log_page(storage, LogQuery(action="new_run"), count_cap=4)
    assert (page.total, page.total_capped) == (5, True)  # counted no further than the cap


def test_part_of_a_name_matches_every_account_holding_it(storage: Storage) -> None:
    page = log_page(storage, LogQuery(user="LICE"))
    assert page.users == ("alice", "Malice")
    assert {entry["username"] for entry in page.entries} == {"alice", "Malice"}
    assert page.total == 8
    exact = log_page(storage, LogQuery(user="ALICE"))  # a whole name is that account only
    assert (exact.users, exact.total) == (("alice",), 4)
    nobody = log_page(storage, LogQuery(user="zed"))
    assert (nobody.users, nobody.entries, nobody.total) == ((), [], 0)


def test_words_are_found_in_comments_workers_and_runs(storage: Storage) -> None:
    crashed = log_page(storage, LogQuery(words="CRASHED move 7"))
    assert seconds(crashed.entries) == [7]
    assert crashed.total is None  # not counted: each row is read to know
    by_worker = log_page(storage, LogQuery(words="bob-4cores", action="new_run"))
    assert seconds(by_worker.entries) == [8, 2]
    assert seconds(log_page(storage, LogQuery(words="king safety", user="bob")).entries) == [
        11,
        8,
        5,
        2,
    ]


def test_words_that_read_too_long_ask_for_a_narrower_search(storage: Storage) -> None:
    with pytest.raises(BadRequest, match="narrow it"):
        log_page(storage, LogQuery(words="nowhere"), search_seconds=0.0)
