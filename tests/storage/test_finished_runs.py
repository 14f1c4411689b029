"""Finished runs as the finished tests pages list them: filters, the search by
owner, branch and description words, keyset pages and bounded counts."""

from dataclasses import replace

import pytest

from arbiter.storage import Storage, run_search
from arbiter.storage.base import Contribution, FinishedRunFilter
from arbiter.storage.records import RunRecord, evolve
from tests.domain.runs.support import run_record


def store(storage: Storage) -> None:
    rows = [
        ("a" * 24, "Alice", "Tune king safety", "tune-ks", 1.0, True, False, 10.0),
        ("b" * 24, "alice", "Simplify away king danger", "simp_kd", 2.0, False, True, 60.0),
        ("c" * 24, "bob", "100% speedup_in search", "fast", 3.0, False, False, 10.0),
        ("d" * 24, "carol", "Unfinished", "wip", 4.0, False, False, 10.0),
    ]
    with storage.write() as tx:
        for run_id, owner, info, branch, updated, green, yellow, tc_base in rows:
            run = run_record(
                id=run_id,
                username=owner,
                last_updated=updated,
                finished=owner != "carol",
                is_green=green,
                is_yellow=yellow,
                tc_base=tc_base,
                args={"info": info, "new_tag": branch, "base_tag": "master"},
            )
            tx.runs.add(run)
            tx.contributions.add([Contribution(owner, 0, 0.0, 1, 0.0)])


def listed(storage: Storage, run_filter: FinishedRunFilter) -> tuple[list[str], int]:
    with storage.read() as tx:
        runs = tx.runs.finished(run_filter)
        count = tx.runs.count_finished(replace(run_filter, offset=0), at_most=100)
    return [run.username for run in runs], count


def test_each_filter_and_its_count(storage: Storage) -> None:
    store(storage)
    assert listed(storage, FinishedRunFilter()) == (["bob", "alice", "Alice"], 3)
    assert listed(storage, FinishedRunFilter(success_only=True)) == (["Alice"], 1)
    assert listed(storage, FinishedRunFilter(yellow_only=True)) == (["alice"], 1)
    assert listed(storage, FinishedRunFilter(ltc_only=True)) == (["alice"], 1)
    assert listed(storage, FinishedRunFilter(offset=1, limit=1)) == (["alice"], 3)


def test_a_count_stops_at_its_bound(storage: Storage) -> None:
    store(storage)
    with storage.read() as tx:
        assert tx.runs.count_finished(FinishedRunFilter(), at_most=2) == 2
        assert tx.runs.count_finished(FinishedRunFilter(), at_most=4) == 3


def test_search_by_part_of_a_name_and_by_words_in_any_case(storage: Storage) -> None:
    store(storage)
    assert listed(storage, FinishedRunFilter(user_contains="ALI")) == (["alice", "Alice"], 2)
    assert listed(storage, FinishedRunFilter(text="KING")) == (["alice", "Alice"], 2)
    assert listed(storage, FinishedRunFilter(text="king tune")) == (["Alice"], 1)
    both = FinishedRunFilter(user_contains="bob", text="king")
    assert listed(storage, both) == ([], 0)


def test_search_finds_branches_owners_and_word_beginnings(storage: Storage) -> None:
    store(storage)
    assert listed(storage, FinishedRunFilter(text="tune-ks")) == (["Alice"], 1)
    assert listed(storage, FinishedRunFilter(text="simp_kd")) == (["alice"], 1)
    assert listed(storage, FinishedRunFilter(text="BOB")) == (["bob"], 1)
    assert listed(storage, FinishedRunFilter(text="spee")) == (["bob"], 1)  # a word's start
    assert listed(storage, FinishedRunFilter(text="peedup")) == ([], 0)  # not its middle
    assert listed(storage, FinishedRunFilter(text="Unfinished")) == ([], 0)  # not finished


def test_a_prefix_of_many_terms_is_left_to_the_index(storage: Storage) -> None:
    """A prefix stands for its whole terms up to MAX_EXPANSIONS; beyond, for
    itself: each way finds the same runs."""
    count = run_search.MAX_EXPANSIONS + 1
    with storage.write() as tx:
        for n in range(count):
            args = {"info": f"king{n:02} tune", "new_tag": "x", "base_tag": "master"}
            run = run_record(
                id=f"{n:024}", username="dave", last_updated=n, finished=True, args=args
            )
            tx.runs.add(run)
    assert listed(storage, FinishedRunFilter(text="king"))[1] == count
    assert listed(storage, FinishedRunFilter(text="king0 tun"))[1] == 10
    assert listed(storage, FinishedRunFilter(text="king1"))[1] == count - 10
    assert listed(storage, FinishedRunFilter(text="king07"))[1] == 1
    assert listed(storage, FinishedRunFilter(text="kingdom"))[1] == 0


def test_search_text_is_never_query_syntax(storage: Storage) -> None:
    store(storage)
    assert listed(storage, FinishedRunFilter(text='100% "speedup"(* search-')) == (["bob"], 1)
    assert listed(storage, FinishedRunFilter(text="%")) == (["bob", "alice", "Alice"], 3)  # no word
    assert listed(storage, FinishedRunFilter(text="king' OR 1=1 --")) == ([], 0)


def test_a_description_changed_is_found_by_its_new_words(storage: Storage) -> None:
    store(storage)
    with storage.write() as tx:
        stored = tx.runs.get("c" * 24)
        assert stored is not None
        tx.runs.save(replace_args(stored, info="now about rooks"), stored)
    assert listed(storage, FinishedRunFilter(text="rooks")) == (["bob"], 1)
    assert listed(storage, FinishedRunFilter(text="speedup")) == ([], 0)


def replace_args(run: RunRecord, **args: str) -> RunRecord:
    return evolve(run, args=evolve(run.args, **args))


@pytest.mark.parametrize("text", ["", "king"])
def test_keyset_pages_walk_the_list_both_ways(storage: Storage, text: str) -> None:
    with storage.write() as tx:
        for index in range(7):
            args = {"info": "king", "new_tag": f"b{index}", "base_tag": "master"}
            updated = float(index // 2)  # pairs updated at once: the id breaks the tie
            tx.runs.add(
                run_record(id=f"{index:024x}", finished=True, last_updated=updated, args=args)
            )
    first = FinishedRunFilter(text=text, limit=3)
    with storage.read() as tx:
        page1 = tx.runs.finished_slice(first)
        page2 = tx.runs.finished_slice(replace(first, before=page1.older or ""))
        page3 = tx.runs.finished_slice(replace(first, before=page2.older or ""))
        back = tx.runs.finished_slice(replace(first, after=page3.newer or ""))
    ids = [[int(run.id, 16) for run in page.runs] for page in (page1, page2, page3, back)]
    assert ids == [[6, 5, 4], [3, 2, 1], [0], [3, 2, 1]]
    assert (page1.newer, page3.older) == (None, None)
    assert back.newer is not None
    assert back.older == page2.older


def test_a_cursor_of_another_list_is_refused(storage: Storage) -> None:
    store(storage)
    with storage.read() as tx:
        page = tx.runs.finished_slice(FinishedRunFilter(limit=1))
        assert page.older is not None
        for bad in (page.older, "s1x", "1.0_zz", "nonsense"):
            with pytest.raises(ValueError, match="cursor"):
                tx.runs.finished_slice(FinishedRunFilter(text="king", before=bad))


@pytest.mark.parametrize("bound", [2, 3, 10])
def test_a_searchs_first_page_counts_as_the_count_does(storage: Storage, bound: int) -> None:
    """One reading of the text index gives the first page and its count: the
    same page, cursors and count as asking for each apart."""
    with storage.write() as tx:
        for index in range(7):
            args = {"info": "king" if index != 3 else "queen", "new_tag": f"b{index}"}
            finished = index != 5  # a live run matches the words but is not listed
            run = run_record(id=f"{index:024x}", finished=finished, last_updated=float(index))
            tx.runs.add(replace_args(run, base_tag="master", **args))
    search = FinishedRunFilter(text="king", limit=2)
    with storage.read() as tx:
        counted = tx.runs.finished_slice(search, count_up_to=bound)
        apart = tx.runs.finished_slice(search)
        count = tx.runs.count_finished(search, at_most=bound)
        plain = tx.runs.finished_slice(FinishedRunFilter(limit=2), count_up_to=bound)
    assert [run.id for run in counted.runs] == [run.id for run in apart.runs]
    assert (counted.newer, counted.older) == (apart.newer, apart.older)
    assert counted.counted == count == min(bound, 5)
    assert plain.counted is None  # a plain list counts from its totals, not here
