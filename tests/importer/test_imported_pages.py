"""An imported dump served: the run pages, the API and a login with a password
Fishtest kept in clear, on both backends."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from arbiter.cli import main
from arbiter.domain.runs import contribution_totals
from arbiter.runtime.settings import Settings
from arbiter.storage.base import NewAction
from arbiter.web.app import create_app
from tests.importer import small_dump
from tests.importer.fishtest_dump import CLEAR_PASSWORD, oid
from tests.importer.small_dump import BAYES, DELETED, LIVE_SPSA, OLD_FIXED, SPRT
from tests.web.support import log_in, state

RUN_IDS = [str(oid(n)) for n in range(1, 11) if str(oid(n)) != DELETED]  # a deleted run has none


@pytest.fixture
def client(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    monkeypatch.setenv("ARBITER_ARGON2_TIME_COST", "1")
    monkeypatch.setenv("ARBITER_ARGON2_MEMORY_KIB", "8")
    dump = small_dump.build(tmp_path)
    data = tmp_path / "data"
    command = ["import", "fishtest", str(dump), "--database-url", database_url]
    assert main([*command, "--data-dir", str(data)]) == 0
    settings = Settings(
        data_dir=data,
        database_url=database_url,
        secret_key="test-secret",
        argon2_time_cost=1,
        argon2_memory_kib=8,
    )
    with TestClient(create_app(settings), base_url="http://testserver") as test_client:
        yield test_client


def test_every_imported_run_has_its_page_and_api_view(client: TestClient) -> None:
    for run_id in RUN_IDS:
        page = client.get(f"/tests/view/{run_id}")
        assert page.status_code == 200, (run_id, page.text[:500])
        assert client.get(f"/tests/stats/{run_id}").status_code == 200, run_id
        view = client.get(f"/api/get_run/{run_id}").json()
        assert view["_id"] == run_id
    assert "LLR: " in client.get(f"/tests/view/{SPRT}").text
    bayes = client.get(f"/api/get_run/{BAYES}").json()
    assert bayes["args"]["sprt"]["elo_model"] == "BayesElo"
    assert bayes["results"]["wins"] == 150
    old_page = client.get(f"/tests/view/{OLD_FIXED}").text
    assert "Elo: " in old_page  # rated on [L, D, W]
    assert "Ptnml(0-2)" not in old_page  # it has no pentanomial, not an empty one
    assert "Ptnml(0-2): 5, 41, 98, 45, 11" in client.get(f"/tests/view/{SPRT}").text
    assert client.get("/tests").status_code == 200
    finished = client.get("/api/finished_runs?page=1").json()
    assert SPRT in finished


def test_bad_tasks_spsa_and_actions_are_served_as_in_fishtest(client: TestClient) -> None:
    bad = client.get(f"/api/get_task/{SPRT}/0bad").json()
    assert bad["task_id"] == 1
    assert bad["stats"]["wins"] == 100
    live = client.get(f"/api/get_run/{LIVE_SPSA}").json()
    assert live["args"]["spsa"]["iter"] == 14
    assert not live["finished"]
    actions = client.post("/api/actions", json={"run_id": SPRT}).json()
    assert {action["_id"] for action in actions} >= {str(oid(201)), str(oid(205))}
    assert client.get("/actions").status_code == 200
    assert client.get("/workers").status_code == 200


def test_a_user_logs_in_with_the_password_fishtest_kept(client: TestClient) -> None:
    log_in(client, "Alice", CLEAR_PASSWORD)
    assert "Alice" in client.get("/user").text


def test_actions_are_found_by_their_fishtest_ids(client: TestClient) -> None:
    from arbiter.domain.actions import wire_id
    from arbiter.storage.base import ActionFilter
    from tests.importer.fishtest_dump import T0
    from tests.web.support import state

    storage = state(client).storage
    with storage.write() as tx:
        tx.actions.add(
            NewAction(time=T0.timestamp() + 100, action="log_message", username="x", message="new")
        )
    with storage.read() as tx:
        native = tx.actions.query(ActionFilter(max_count=1))[0]
    native_id, imported_id = wire_id(native), str(oid(205))
    # What the time and row of the imported action would make: not its _id.
    lookalike = f"{int(T0.timestamp()) + 5:08x}{5:016x}"

    def ids(query: dict[str, object]) -> set[str]:
        reply = client.post("/api/actions", json=query)
        assert reply.status_code == 200, reply.text
        return {action["_id"] for action in reply.json()}

    assert ids({"_id": imported_id}) == {imported_id}
    assert ids({"_id": native_id}) == {native_id}
    assert ids({"_id": {"$in": [imported_id, native_id, lookalike]}}) == {imported_id, native_id}
    assert ids({"_id": lookalike}) == set()
    everything = ids({})
    assert ids({"_id": {"$ne": imported_id}}) == everything - {imported_id}
    assert ids({"_id": {"$nin": [native_id, lookalike]}}) == everything - {native_id}


def test_an_imported_live_run_goes_on_with_a_worker_of_an_imported_account(
    client: TestClient,
) -> None:
    """The live SPSA run hands its next task to a worker that signs in with the
    password Fishtest kept, as the reference would have."""
    from tests.web.api_support import post, worker_body, worker_info

    info = worker_info("Alice", "eeee", worker_arch="x86-64-avx2")
    body = worker_body("Alice", "eeee", password=CLEAR_PASSWORD, info=info)
    status, reply = post(client, "/api/request_task", body)
    assert status == 200, reply
    assert reply["run"]["_id"] == LIVE_SPSA
    assert reply["task_id"] == 1  # after the task the dump had


def test_an_imported_history_has_the_derived_data_live_operation_keeps(
    client: TestClient,
) -> None:
    """Contributor totals and search words, built by the import, are what the
    runs themselves give: a rebuild changes nothing, and the pages find them."""
    storage = state(client).runs.context.storage
    with storage.read() as tx:
        imported = tx.contributions.all_time(), tx.contributions.since(0)
    contribution_totals.rebuild(storage)
    with storage.read() as tx:
        assert (tx.contributions.all_time(), tx.contributions.since(0)) == imported
        owner = tx.runs.get(SPRT)
    assert owner is not None
    player = next(row.username for row in imported[0] if row.games > 0)
    assert f"/tests/user/{player}" in client.get("/contributors").text
    found = client.get(f"/tests/finished?text={owner.args.new_tag}").text
    assert f"/tests/view/{SPRT}" in found
