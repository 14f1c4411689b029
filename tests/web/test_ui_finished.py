"""The finished tests pages: totals, search by branch, author or description
words, and pages linked by cursor."""

import re

import pytest
from starlette.testclient import TestClient

from arbiter.domain.accounts import User
from arbiter.domain.runs import queries
from tests.web.runs_support import submit, users
from tests.web.support import state


def finished_runs(client: TestClient, repo_url: str, infos: list[str]) -> list[str]:
    """Runs of alice with these descriptions, stopped in this order (the last is newest)."""
    alice, root = accounts(client)
    lifecycle = state(client).runs.lifecycle
    run_ids = []
    for index, info in enumerate(infos):
        run_id = submit(client, alice, repo_url, info=info, num_games=2000)
        lifecycle.stop(root if index % 2 else alice, run_id)
        run_ids.append(run_id)
    return run_ids


def accounts(client: TestClient) -> tuple[User, User]:
    found = state(client).accounts.get_user("alice"), state(client).accounts.get_user("root")
    if found[0] is None or found[1] is None:
        return users(client)
    return found[0], found[1]


def shown(html: str) -> list[str]:
    """The run ids the page's finished table links to, in order."""
    table = html.split('id="finished"', 1)[1]
    return re.findall(r'href="/tests/view/([0-9a-f]{24})"', table)


def link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', html)
    return None if found is None else found.group(1).replace("&amp;", "&")


def test_search_finds_description_words_branches_and_authors(
    client: TestClient, repo_url: str
) -> None:
    first, second = finished_runs(client, repo_url, ["Tune king safety", "Simplify pawn code"])
    assert shown(client.get("/tests/finished?text=king").text) == [first]
    assert shown(client.get("/tests/finished?text=SIMPL").text) == [second]  # a word's start
    assert shown(client.get("/tests/finished?text=alice").text) == [second, first]
    assert shown(client.get("/tests/finished?text=patch+pawn").text) == [second]  # branch too
    page = client.get("/tests/finished?text=nothing+like+this").text
    assert "0 tests" in page


def test_totals_are_exact_for_the_whole_list_and_a_user(client: TestClient, repo_url: str) -> None:
    finished_runs(client, repo_url, ["one", "two", "three"])
    alice, _ = accounts(client)
    submit(client, alice, repo_url, info="still live", num_games=2000)
    assert "3 tests" in client.get("/tests/finished").text
    assert '<span class="badge">3</span>' in client.get("/tests/user/alice").text
    assert '<span class="badge">3</span>' in client.get("/tests").text


def test_a_filtered_total_stops_at_its_bound(
    client: TestClient, repo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished_runs(client, repo_url, ["king one", "king two", "king three"])
    monkeypatch.setattr(queries, "COUNT_BOUND", 2)
    assert "2+ tests" in client.get("/tests/finished?text=king").text
    assert "3 tests" in client.get("/tests/finished").text  # the whole list: exact


@pytest.mark.parametrize("query", ["", "text=run", "tab=all&user=ali"])
def test_pages_link_older_and_newer_by_cursor(
    client: TestClient, repo_url: str, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    newest_first = finished_runs(client, repo_url, [f"run {n}" for n in range(5)])[::-1]
    monkeypatch.setattr(queries, "FINISHED_PAGE_SIZE", 2)
    page = client.get(f"/tests/finished?{query}").text
    assert shown(page) == newest_first[:2]
    assert link(page, "prev") is None
    older = link(page, "next")
    assert older is not None
    page = client.get(older).text
    assert shown(page) == newest_first[2:4]
    last = client.get(link(page, "next") or "").text
    assert shown(last) == newest_first[4:]
    assert link(last, "next") is None
    back = client.get(link(last, "prev") or "").text
    assert shown(back) == newest_first[2:4]
    assert shown(client.get(link(back, "first") or "").text) == newest_first[:2]


def test_a_users_pages_link_by_cursor(
    client: TestClient, repo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    newest_first = finished_runs(client, repo_url, [f"run {n}" for n in range(3)])[::-1]
    monkeypatch.setattr(queries, "FINISHED_PAGE_SIZE", 2)
    page = client.get("/tests/user/alice").text
    assert shown(page) == newest_first[:2]
    assert shown(client.get(link(page, "next") or "").text) == newest_first[2:]


@pytest.mark.parametrize(
    "cursor", ["before=nonsense", "after=s12x", "before=" + "9" * 100, "page=2449"]
)
def test_a_cursor_the_list_did_not_make_reads_as_the_first_page(
    client: TestClient, repo_url: str, cursor: str
) -> None:
    newest_first = finished_runs(client, repo_url, ["a", "b"])[::-1]
    reply = client.get(f"/tests/finished?{cursor}")
    assert reply.status_code == 200
    assert shown(reply.text) == newest_first
