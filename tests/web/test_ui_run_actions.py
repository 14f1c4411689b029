"""The run page's buttons: shown only to whom may use them, POST with CSRF, flashes."""

from starlette.testclient import TestClient

from tests.web.runs_support import play, submit, users
from tests.web.support import csrf_of, log_in, make_user, state


def post(client: TestClient, run_id: str, action: str, **fields: str) -> object:
    form = {"csrf_token": csrf_of(client, f"/tests/view/{run_id}"), **fields}
    return client.post(f"/tests/view/{run_id}/{action}", data=form, follow_redirects=False)


def test_an_approver_sees_and_uses_approve(client: TestClient, repo_url: str) -> None:
    alice, _ = users(client)
    run_id = submit(client, alice, repo_url)
    log_in(client, "root")
    assert 'id="approve"' in client.get(f"/tests/view/{run_id}").text
    reply = post(client, run_id, "approve")
    assert reply.status_code == 303  # type: ignore[attr-defined]
    page = client.get(f"/tests/view/{run_id}").text
    assert "Run approved." in page
    assert 'id="approve"' not in page
    assert state(client).runs.queries.run(run_id).approver == "root"


def test_a_non_approver_neither_sees_nor_uses_approve(client: TestClient, repo_url: str) -> None:
    alice, _ = users(client)
    make_user(client, "bob")
    run_id = submit(client, alice, repo_url)
    for name in ("alice", "bob"):  # the owner, and someone else
        log_in(client, name)
        page = client.get(f"/tests/view/{run_id}").text
        assert 'id="approve"' not in page
        assert post(client, run_id, "approve").status_code == 403  # type: ignore[attr-defined]
    assert not state(client).runs.queries.run(run_id).approved


def test_anonymous_visitors_see_no_buttons(client: TestClient, repo_url: str) -> None:
    alice, _ = users(client)
    run_id = submit(client, alice, repo_url)
    page = client.get(f"/tests/view/{run_id}").text
    for button in ("approve", "stop", "purge", "delete", "modify"):
        assert f'id="{button}"' not in page
    assert "Reschedule" not in page


def test_the_owner_stops_modifies_and_deletes(client: TestClient, repo_url: str) -> None:
    alice, root = users(client)
    run_id = submit(client, alice, repo_url, num_games=4000)
    state(client).runs.lifecycle.approve(root, run_id)
    log_in(client, "alice")
    page = client.get(f"/tests/view/{run_id}").text
    for button in ("stop", "purge", "delete", "modify"):
        assert f'id="{button}"' in page
    modified = post(
        client, run_id, "modify", num_games="2000", priority="0", throughput="100", info="new"
    )
    assert modified.status_code == 303  # type: ignore[attr-defined]
    run = state(client).runs.queries.run(run_id)
    assert (run.args.num_games, run.args.info) == (2000, "new")
    assert post(client, run_id, "stop").status_code == 303  # type: ignore[attr-defined]
    assert "Run stopped." in client.get(f"/tests/view/{run_id}").text
    assert state(client).runs.queries.run(run_id).finished
    assert post(client, run_id, "delete").headers["location"] == "/tests"  # type: ignore[attr-defined]
    # Still shown, as the reference shows it, with a note and no button.
    deleted = client.get(f"/tests/view/{run_id}")
    assert deleted.status_code == 200
    assert 'id="run-deleted"' in deleted.text
    assert not any(f'id="{button}"' in deleted.text for button in ("stop", "purge", "delete"))
    assert client.get(f"/tests/stats/{run_id}").status_code == 404


def test_the_modify_form_calls_an_sprt_game_count_a_cap(client: TestClient, repo_url: str) -> None:
    alice, _ = users(client)
    sprt = submit(client, alice, repo_url, sprt={"elo0": 0, "elo1": 2})
    fixed = submit(client, alice, repo_url, num_games=4000)
    log_in(client, "alice")
    sprt_page = client.get(f"/tests/view/{sprt}").text
    assert '<label for="num_games">Most games</label>' in sprt_page
    assert "SPRT stops once it decides" in sprt_page
    fixed_page = client.get(f"/tests/view/{fixed}").text
    assert '<label for="num_games">Number of games</label>' in fixed_page
    assert "SPRT stops once it decides" not in fixed_page


def test_a_bad_modification_is_shown_beside_its_field(client: TestClient, repo_url: str) -> None:
    alice, _ = users(client)
    run_id = submit(client, alice, repo_url, num_games=4000)
    log_in(client, "alice")
    reply = post(
        client, run_id, "modify", num_games="1234", priority="0", throughput="100", info=""
    )
    assert reply.status_code == 400  # type: ignore[attr-defined]
    assert 'id="num_games-error"' in reply.text  # type: ignore[attr-defined]
    assert 'value="1234"' in reply.text  # type: ignore[attr-defined]


def test_purge_reports_what_it_did(client: TestClient, repo_url: str) -> None:
    alice, root = users(client)
    run_id = submit(client, alice, repo_url, num_games=4000)
    state(client).runs.lifecycle.approve(root, run_id)
    play(client, run_id, alice)
    log_in(client, "root")
    post(client, run_id, "purge")
    assert "Nothing to purge" in client.get(f"/tests/view/{run_id}").text


def test_approving_twice_is_a_flash_not_an_error_page(client: TestClient, repo_url: str) -> None:
    alice, root = users(client)
    run_id = submit(client, alice, repo_url)
    log_in(client, "root")
    token = csrf_of(client, f"/tests/view/{run_id}")
    state(client).runs.lifecycle.approve(root, run_id)  # someone was faster
    reply = client.post(f"/tests/view/{run_id}/approve", data={"csrf_token": token})
    assert reply.status_code == 200
    assert "already approved" in reply.text


def test_logged_out_posts_go_to_the_login_page(client: TestClient, repo_url: str) -> None:
    alice, _ = users(client)
    run_id = submit(client, alice, repo_url)
    form = {"csrf_token": csrf_of(client, "/login")}
    reply = client.post(f"/tests/view/{run_id}/stop", data=form, follow_redirects=False)
    assert reply.status_code == 302  # type: ignore[attr-defined]
    assert reply.headers["location"].startswith("/login")
    assert not state(client).runs.queries.run(run_id).finished


def test_a_live_refresh_leaves_the_flash_for_the_page(client: TestClient, repo_url: str) -> None:
    alice, _ = users(client)
    run_id = submit(client, alice, repo_url)
    log_in(client, "root")
    post(client, run_id, "approve")
    assert "Run approved." not in client.get(f"/tests/view/{run_id}?live=1").text
    assert "Run approved." in client.get(f"/tests/view/{run_id}").text
