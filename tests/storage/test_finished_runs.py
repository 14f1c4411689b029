"""Finished runs as the finished tests pages list them: filters, the search by
owner and description words, and the count beside each page."""

from dataclasses import replace

from arbiter.storage import Storage
from arbiter.storage.base import FinishedRunFilter
from tests.domain.runs.support import run_record


def store(storage: Storage) -> None:
    rows = [
        ("a" * 24, "Alice", "Tune king safety", 1.0, True, False, 10.0),
        ("b" * 24, "alice", "Simplify away king danger", 2.0, False, True, 60.0),
        ("c" * 24, "bob", "100% speedup_in search", 3.0, False, False, 10.0),
        ("d" * 24, "carol", "Unfinished", 4.0, False, False, 10.0),
    ]
    with storage.write() as tx:
        for run_id, owner, info, updated, green, yellow, tc_base in rows:
            tx.runs.add(
                run_record(
                    id=run_id,
                    username=owner,
                    last_updated=updated,
                    finished=owner != "carol",
                    is_green=green,
                    is_yellow=yellow,
                    tc_base=tc_base,
                    args={"info": info},
                )
            )


def listed(storage: Storage, run_filter: FinishedRunFilter) -> tuple[list[str], int]:
    with storage.read() as tx:
        runs = tx.runs.finished(run_filter)
        count = tx.runs.count_finished(replace(run_filter, offset=0, limit=1))
    return [run.username for run in runs], count


def test_each_filter_and_its_count(storage: Storage) -> None:
    store(storage)
    assert listed(storage, FinishedRunFilter()) == (["bob", "alice", "Alice"], 3)
    assert listed(storage, FinishedRunFilter(success_only=True)) == (["Alice"], 1)
    assert listed(storage, FinishedRunFilter(yellow_only=True)) == (["alice"], 1)
    assert listed(storage, FinishedRunFilter(ltc_only=True)) == (["alice"], 1)
    assert listed(storage, FinishedRunFilter(offset=1, limit=1)) == (["alice"], 3)


def test_search_by_part_of_a_name_and_by_words_in_any_case(storage: Storage) -> None:
    store(storage)
    assert listed(storage, FinishedRunFilter(user_contains="ALI")) == (["alice", "Alice"], 2)
    assert listed(storage, FinishedRunFilter(words=("KING",))) == (["alice", "Alice"], 2)
    assert listed(storage, FinishedRunFilter(words=("king", "tune"))) == (["Alice"], 1)
    both = FinishedRunFilter(user_contains="bob", words=("king",))
    assert listed(storage, both) == ([], 0)


def test_like_wildcards_in_a_search_match_only_themselves(storage: Storage) -> None:
    store(storage)
    assert listed(storage, FinishedRunFilter(words=("100%",))) == (["bob"], 1)
    assert listed(storage, FinishedRunFilter(words=("%",))) == (["bob"], 1)
    assert listed(storage, FinishedRunFilter(words=("p_in",))) == (["bob"], 1)
    assert listed(storage, FinishedRunFilter(words=("d_n",))) == ([], 0)
