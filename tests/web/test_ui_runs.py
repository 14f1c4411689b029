"""The home page's run tables and a run's page, rendered from real runs."""

from starlette.testclient import TestClient

from tests.domain.runs.support import pairs, worker
from tests.web.support import make_user, state


def submit(client: TestClient, repo_url: str, **args: object) -> str:
    alice = make_user(client, "alice")
    body = {"tests_repo": repo_url, "new_tag": "patch", "base_tag": "master", **args}
    return state(client).runs.lifecycle.submit(alice, body)


def test_home_lists_a_pending_run(client: TestClient, repo_url: str) -> None:
    run_id = submit(client, repo_url, sprt={"elo0": 0, "elo1": 2})
    html = client.get("/tests").text
    pending = html[html.index('id="pending"') : html.index('id="active"')]
    assert f"/tests/view/{run_id}" in pending
    assert "SPRT patch vs master" in pending


def test_run_page_shows_results_and_tasks(client: TestClient, repo_url: str) -> None:
    run_id = submit(client, repo_url, num_games=2000)
    runs = state(client).runs
    root = make_user(client, "root", approver=True)
    runs.lifecycle.approve(root, run_id)
    alice = state(client).accounts.get_user("alice")
    assert alice is not None
    reply = runs.scheduler.request_task(worker(), alice, "10.0.0.1")
    runs.ingest.update_task(worker(), run_id, reply["task_id"], pairs(ld=3, dd=7, wd=5, ww=1))
    html = client.get(f"/tests/view/{run_id}").text
    assert "2000 games - patch vs master" in html
    assert "W: 7 L: 3 D: 22" in html
    assert "alice-4cores-abcd" in html


def test_why_no_workers_is_on_the_page(client: TestClient, repo_url: str) -> None:
    run_id = submit(client, repo_url)
    assert "not approved yet" in client.get(f"/tests/view/{run_id}").text


def test_unknown_run_is_a_404_page(client: TestClient) -> None:
    reply = client.get("/tests/view/" + "0" * 24)
    assert reply.status_code == 404
    assert "There is no run" in reply.text


def test_a_page_number_that_is_not_one_shows_the_first_page(
    client: TestClient, repo_url: str
) -> None:
    run_id = submit(client, repo_url)
    for page in ("\u00b9", "9" * 5000, "-2"):  # a superscript passes str.isdigit
        assert client.get("/tests", params={"page": page}).status_code == 200
        reply = client.get(f"/tests/view/{run_id}", params={"page": page})
        assert reply.status_code == 200
