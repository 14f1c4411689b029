"""Submissions that read their commits, through the form and on the run page,
on both storage backends, with a real Stockfish-shaped official repository and
a fork (file:// URLs, let through by ARBITER_GIT_ALLOW=file)."""

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from arbiter.storage.records import NetRecord
from tests.domain.repos.support import BIG_1, BIG_2, SMALL, Stockfishes, make_stockfishes
from tests.web.api_support import api_client, api_settings
from tests.web.runs_support import new_run_form, users
from tests.web.support import log_in, state


@pytest.fixture(scope="module")
def sf(tmp_path_factory: pytest.TempPathFactory) -> Stockfishes:
    return make_stockfishes(tmp_path_factory.mktemp("sf"))


@pytest.fixture
def client(
    tmp_path: Path, database_url: str, sf: Stockfishes, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    settings = api_settings(tmp_path, database_url, git_official_repo=sf.official)
    with api_client(settings, monkeypatch) as test_client:
        users(test_client)
        yield test_client


def hold_nets(client: TestClient, *names: str) -> None:
    with state(client).storage.write() as tx:
        for name in names:
            tx.nets.add(NetRecord(name, "root", "0" * 64, 1, 0.0, 0, False, None, None))


def submit_form(client: TestClient, sf: Stockfishes, **overrides: str) -> tuple[int, str]:
    log_in(client, "alice")
    form = new_run_form(client, sf.fork, info="", **overrides)
    reply = client.post("/tests/run", data=form, follow_redirects=False)
    return reply.status_code, reply.headers.get("location", reply.text)


def test_a_missing_net_is_named_with_how_to_upload_it(
    client: TestClient, sf: Stockfishes, caplog: pytest.LogCaptureFixture
) -> None:
    hold_nets(client, BIG_1, SMALL)
    with caplog.at_level(logging.INFO, logger="arbiter.submissions"):
        status, page = submit_form(client, sf)
    assert status == 400
    assert f"the net {BIG_2} is not on this server: upload it" in page
    assert state(client).runs.queries.active_runs() == {}
    refused = [r.getMessage() for r in caplog.records if "submission refused" in r.getMessage()]
    assert len(refused) == 1
    assert "user=alice host=file reason=new_tag: the net" in refused[0]


def test_the_run_reads_nets_bench_and_message_and_shows_the_diff_to_an_approver(
    client: TestClient, sf: Stockfishes
) -> None:
    hold_nets(client, BIG_1, BIG_2, SMALL)
    status, location = submit_form(client, sf, base_tag=sf.first)  # a stale base
    assert status == 303, location
    run_id = location.rsplit("/", 1)[1]
    spec = state(client).runs.queries.run(run_id).args
    assert (spec.base_nets, spec.new_nets) == ([BIG_1, SMALL], [BIG_2, SMALL])
    assert (spec.base_signature, spec.new_signature) == ("1000", "1234")
    assert spec.info == spec.msg_new == "Use a bigger net\n\nTrained longer.\n\nBench: 1234"
    owner_page = client.get(location).text
    assert "Warning: The base is not the latest common ancestor" in owner_page  # at submission

    client.cookies.clear()
    log_in(client, "root")
    page = client.get(location).text
    assert "The base is not the latest common ancestor of the new commit and master" in page
    assert '<span class="del">-#define EvalFileDefaultNameBig &#34;' in page
    assert f'<span class="add">+#define EvalFileDefaultNameBig &#34;{BIG_2}&#34;</span>' in page
    assert "Use a bigger net</li>" in page
    assert "Simplify search</li>" in page
    assert f"git diff {sf.first} {sf.patch}" in page

    with state(client).storage.read() as tx:
        net = tx.nets.get(BIG_2)
        master_net = tx.nets.get(BIG_1)
    assert net is not None
    assert master_net is not None
    assert net.first_test["run_id"] == net.last_test["run_id"] == run_id
    assert not master_net.is_master  # the base was not master's head


def test_master_bench_is_enforced_and_master_nets_marked(
    client: TestClient, sf: Stockfishes
) -> None:
    hold_nets(client, BIG_1, BIG_2, SMALL)
    status, page = submit_form(client, sf, base_signature="777")
    assert status == 400
    assert "the base is the official master, whose bench is 1100" in page
    status, location = submit_form(client, sf)
    assert status == 303
    spec = state(client).runs.queries.run(location.rsplit("/", 1)[1]).args
    assert spec.base_signature == "1100"
    with state(client).storage.read() as tx:
        assert tx.nets.get(BIG_1).is_master  # type: ignore[union-attr]
        assert not tx.nets.get(BIG_2).is_master  # type: ignore[union-attr]


def test_warnings_are_for_approvers_and_the_owner_only(client: TestClient, sf: Stockfishes) -> None:
    hold_nets(client, BIG_1, BIG_2, SMALL)
    status, location = submit_form(client, sf, base_tag="orphan")
    assert status == 303
    state(client).accounts.create_user("bob", "another strong password 42", email="b@x.org")
    client.cookies.clear()
    log_in(client, "bob", "another strong password 42")
    page = client.get(location).text
    assert "The base commit is not an ancestor" not in page
    assert "Diff:" in page  # the diff is for everyone


def test_the_api_gives_the_warnings_with_the_run(client: TestClient, sf: Stockfishes) -> None:
    hold_nets(client, BIG_1, BIG_2, SMALL)
    token = state(client).accounts.create_token("alice")
    body = {"tests_repo": sf.fork, "base_tag": "orphan", "new_tag": "patch"}
    reply = client.post("/api/runs", json=body, headers={"authorization": f"Bearer {token}"})
    assert reply.status_code == 200, reply.text
    assert "The base commit is not an ancestor of the new commit." in reply.json()["warnings"]
    clean = {**body, "base_tag": "master"}
    reply = client.post("/api/runs", json=clean, headers={"authorization": f"Bearer {token}"})
    assert set(reply.json()) == {"run_id", "duration"}  # no warnings, no key


def test_two_concurrent_submissions_of_one_repository(client: TestClient, sf: Stockfishes) -> None:
    hold_nets(client, BIG_1, BIG_2, SMALL)
    runs = state(client).runs
    alice = state(client).accounts.get_user("alice")
    assert alice is not None
    body = {"tests_repo": sf.fork, "base_tag": "master", "new_tag": "patch"}
    start = threading.Barrier(2)

    def submit() -> str:
        start.wait()
        return runs.lifecycle.submit(alice, body)

    with ThreadPoolExecutor(2) as pool:
        ids = list(pool.map(lambda _: submit(), range(2)))
    assert len(set(ids)) == 2
    for run_id in ids:
        assert runs.queries.run(run_id).args.resolved_new == sf.patch
    assert len(runs.code.reader.cache.mirrors()) == 1  # one mirror, shared
