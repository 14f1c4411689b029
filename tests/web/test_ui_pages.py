"""The dashboard's other pages: live fragments, raw statistics, live Elo, actions,
contributors, machines, worker blocks and the SPRT calculator."""

import re

from starlette.testclient import TestClient

from arbiter.storage.records import QuarantineRecord
from arbiter.web.ui.fleet import action_filter
from tests.web.runs_support import play, submit, users
from tests.web.support import csrf_of, log_in, state


def live_run(client: TestClient, repo_url: str, **args: object) -> str:
    alice, root = users(client)
    run_id = submit(client, alice, repo_url, **args)
    state(client).runs.lifecycle.approve(root, run_id)
    play(client, run_id, alice)
    return run_id


def test_the_home_page_refreshes_its_run_tables(client: TestClient, repo_url: str) -> None:
    run_id = live_run(client, repo_url, num_games=4000)
    html = client.get("/tests").text
    assert 'data-live-src="/tests?live=1"' in html
    assert "/static/app.js?v=" in html
    fragment = client.get("/tests?live=1").text
    assert "<html" not in fragment
    assert f"/tests/view/{run_id}" in fragment
    assert 'data-tags="games stc st"' in fragment
    assert "queue" in fragment


def test_the_run_page_fragment_answers_204_until_something_changes(
    client: TestClient, repo_url: str
) -> None:
    run_id = live_run(client, repo_url, num_games=4000)
    first = client.get(f"/tests/view/{run_id}?live=1")
    assert first.status_code == 200
    assert 'id="result-box"' in first.text
    assert "<html" not in first.text
    version = first.headers["x-live-version"]
    same = client.get(f"/tests/view/{run_id}?live=1&version={version}")
    assert same.status_code == 204
    alice = state(client).accounts.get_user("alice")
    assert alice is not None
    play(client, run_id, alice, key="ef01", dd=20)
    assert client.get(f"/tests/view/{run_id}?live=1&version={version}").status_code == 200


def test_a_finished_run_tells_the_poller_to_stop(client: TestClient, repo_url: str) -> None:
    run_id = live_run(client, repo_url, num_games=4000)
    root = state(client).accounts.get_user("root")
    assert root is not None
    state(client).runs.lifecycle.stop(root, run_id)
    assert client.get(f"/tests/view/{run_id}?live=1").status_code == 286
    assert "data-live-done" in client.get(f"/tests/view/{run_id}").text


def test_the_run_page_shows_charts_tasks_and_residuals(client: TestClient, repo_url: str) -> None:
    run_id = live_run(client, repo_url, sprt={"elo0": 0, "elo1": 2})
    html = client.get(f"/tests/view/{run_id}").text
    assert 'id="llr-chart"' in html
    assert 'id="elo-chart"' in html or "Elo estimate with its 95% confidence interval" in html
    assert "alice-4cores-abcd-1234" in html
    by_worker = client.get(f"/tests/view/{run_id}?sort=worker&order=desc").text
    assert 'aria-sort="descending"' in by_worker


def test_raw_statistics(client: TestClient, repo_url: str) -> None:
    run_id = live_run(client, repo_url, sprt={"elo0": 0, "elo1": 2})
    html = client.get(f"/tests/stats/{run_id}").text
    for heading in ("SPRT", "Trinomial (per game)", "Pentanomial (per pair)", "Log-likelihood"):
        assert heading in html
    assert "Normalized, exact" in html
    # The bounds in the four models, the openings' RMS bias, refreshed while it runs.
    assert "<th>Logistic</th><th>Normalized</th><th>BayesElo</th><th>Score</th>" in html
    assert re.search(r"<th>H1</th><td>[0-9.]+</td><td>2\.000</td>", html)  # a normalized run
    assert "RMS bias (Elo)" in html
    assert f'data-live-src="/tests/stats/{run_id}?live=1"' in html
    live = client.get(f"/tests/stats/{run_id}?live=1")
    assert (live.status_code, "<html" in live.text, "RMS bias" in live.text) == (200, False, True)
    assert client.get("/tests/stats/" + "0" * 24).status_code == 404


def test_live_elo_has_three_gauges_and_stops_once_decided(
    client: TestClient, repo_url: str
) -> None:
    run_id = live_run(client, repo_url, sprt={"elo0": 0, "elo1": 2})
    html = client.get(f"/tests/live_elo/{run_id}").text
    for gauge in ("gauge-los", "gauge-llr", "gauge-elo"):
        assert f'id="{gauge}"' in html
    assert client.get(f"/tests/live_elo/{run_id}?live=1").status_code == 200
    root = state(client).accounts.get_user("root")
    assert root is not None
    state(client).runs.lifecycle.stop(root, run_id)
    assert client.get(f"/tests/live_elo/{run_id}?live=1").status_code == 286


def test_the_actions_log_filters(client: TestClient, repo_url: str) -> None:
    run_id = live_run(client, repo_url, num_games=4000)
    everything = client.get("/actions").text
    assert "new_run" in everything
    assert "approve_run" in everything
    approvals = client.get("/actions?action=approve_run").text
    assert "approve_run</a>" in approvals
    assert "new_run</a>" not in approvals
    assert "approve_run" in client.get(f"/actions?run_id={run_id}&user=root").text
    query, shown = action_filter(
        {"action": "drop tables", "user": "a b", "before": "x", "order": "up", "text": " a  b "}
    )
    assert (query.action, query.user, query.before, query.oldest_first) == (None,) * 3 + (False,)
    assert shown == {"action": "", "user": "", "run_id": "", "text": "a b", "order": "newest"}
    # Part of a name, words, either order, and how many match.
    found = client.get("/actions?user=RO&text=approve").text
    assert "approve_run</a>" in found
    assert "new_run</a>" not in found
    assert "user root" in found
    oldest = client.get("/actions?order=oldest").text
    assert oldest.index("new_run</a>") < oldest.index("approve_run</a>")
    assert re.search(r"2 of 2 matching actions", client.get(f"/actions?run_id={run_id}").text)
    assert "No user is named like zed." in client.get("/actions?user=zed").text


def test_contributors_and_machines(client: TestClient, repo_url: str) -> None:
    run_id = live_run(client, repo_url, num_games=4000)
    contributors = client.get("/contributors").text
    assert ">alice</a>" in contributors
    assert "Last 30 days" in contributors
    assert ">alice</a>" in client.get("/contributors/monthly").text
    machines = client.get("/machines").text
    assert "alice-4cores-abcd" in machines
    assert f"/tests/view/{run_id}" in machines
    # The page a worker points its owner to shows what that machine plays.
    machine = client.get("/workers/alice-4cores-abcd").text
    assert "Playing now" in machine
    assert f"/tests/view/{run_id}" in machine
    assert 'id="worker-history"' in machine  # its latest runs: its health over time
    assert '<td data-label="Mnps reported / in games">0.80 / –</td>' in machine
    assert "Not playing right now" in client.get("/workers/alice-4cores-abc").text
    # The health check's record of the machine, on its page and its owner's profile.
    health = state(client).health
    assert health is not None
    health.check()
    record = client.get("/workers/alice-4cores-abcd").text
    assert re.search(r'id="worker-record">.* 1 run of 1 author, 1 task, ', record)
    assert "no evidence against it" in record
    log_in(client, "alice")
    profile = client.get("/user").text
    assert 'id="my-machines-health"' in profile
    assert '<a href="/workers/alice-4cores-abcd">alice-4cores-abcd</a>' in profile


def test_the_owner_blocks_a_machine_from_its_page(client: TestClient) -> None:
    users(client)
    page = client.get("/workers/alice-4cores-abcd").text
    assert "never seen here" in page
    assert "Nothing blocks it from playing." in page
    unknown = client.get("/workers/nobody-4cores-abcd")  # no owner is guessed
    assert unknown.status_code == 404
    assert "No account is named nobody" in unknown.text
    assert "<textarea" not in page  # anonymous: no form
    log_in(client, "alice")
    form = {"csrf_token": csrf_of(client, "/workers/alice-4cores-abcd"), "blocked": "true"}
    form["message"] = "fan broken"
    reply = client.post("/workers/alice-4cores-abcd", data=form)
    assert reply.status_code == 200
    assert "alice-4cores-abcd blocked." in reply.text
    assert "fan broken" in client.get("/workers").text
    refused = {**form, "message": "x" * 600}
    assert 'id="message-error"' in client.post("/workers/alice-4cores-abcd", data=refused).text
    assert client.get("/workers/not-a-worker").status_code == 404


def test_someone_else_cannot_block_a_machine(client: TestClient) -> None:
    users(client)
    log_in(client, "root")
    state(client).accounts.create_user("bob", "correct horse battery staple 1729", email="b@x.org")
    log_in(client, "bob")
    assert "<textarea" not in client.get("/workers/alice-4cores-abcd").text
    form = {"csrf_token": csrf_of(client, "/workers"), "blocked": "true", "message": ""}
    assert client.post("/workers/alice-4cores-abcd", data=form).status_code == 403


def test_the_sprt_calculator(client: TestClient) -> None:
    html = client.get("/sprt_calc?elo_model=logistic&elo0=0&elo1=2&elo=1").text
    assert "passes with probability <strong>50.0%</strong>" in html
    assert 'id="pass-chart"' in html
    assert 'id="games-chart"' in html
    assert "logistic Elo [0.00, 2.00]" in html
    # Normalized bounds (the default) are narrower in logistic Elo with a biased book.
    normalized = client.get("/sprt_calc").text
    assert re.search(
        r"logistic Elo \[0\.00, 1\.0\d\] · normalized Elo \[0\.00, 2\.00\]", normalized
    )
    clash = client.get("/sprt_calc?draw_ratio=0.9&rms_bias=191")
    assert clash.status_code == 400
    assert 'id="rms_bias-error"' in clash.text
    assert "not compatible" in clash.text
    refused = client.get("/sprt_calc?elo0=2&elo1=1")
    assert refused.status_code == 400
    assert 'id="elo1-error"' in refused.text
    assert 'id="alpha-error"' in client.get("/sprt_calc?alpha=0.7").text


def test_the_site_has_an_icon_where_browsers_look(client: TestClient) -> None:
    assert 'rel="icon" href="/static/favicon.svg?v=' in client.get("/tests").text
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg")


def test_quarantined_machines_are_listed_and_only_approvers_release_them(
    client: TestClient,
) -> None:
    users(client)
    name = "alice-8cores-0badbad0"
    finding = {"run_id": "0" * 24, "author": "carol", "kind": "crashes", "detail": "12 crashes"}
    with state(client).storage.write() as tx:
        tx.quarantine.put(QuarantineRecord(name, True, 1.0, [finding] * 3, []))
    listing = client.get("/workers").text
    assert f'id="quarantine-{name}"' in listing
    assert ">Release</button>" not in listing  # anonymous
    page = client.get(f"/workers/{name}").text
    assert "Quarantined</strong> by the health check" in page
    assert 'id="worker-history"' not in page  # it played nothing here
    log_in(client, "alice")  # its owner is told on the profile
    assert f'<a href="/workers/{name}">{name}</a>' in client.get("/user").text
    form = {"csrf_token": csrf_of(client, "/workers")}
    assert client.post(f"/workers/{name}/release", data=form).status_code == 403
    assert client.post(f"/workers/{name}/purge", data=form).status_code == 403
    log_in(client, "root")
    form = {"csrf_token": csrf_of(client, "/workers")}
    assert 'id="purge-machine"' in client.get(f"/workers/{name}").text
    purged = client.post(f"/workers/{name}/purge", data=form)
    assert f"Purged 0 task(s) of {name} from the runs still going." in purged.text
    reply = client.post(f"/workers/{name}/release", data=form)
    assert reply.status_code == 200
    assert f"{name} released from quarantine." in reply.text
    assert "No machine is quarantined." in client.get("/workers").text
