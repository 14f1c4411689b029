"""The new test form: presets, stop rules, errors beside their field, reschedule."""

import logging
import threading

import pytest
from starlette.testclient import TestClient

from arbiter.runtime.settings import Settings
from arbiter.storage.run_spec import spec_of
from arbiter.web.app import create_app
from arbiter.web.ui import submission
from tests.web.live_server import free_port
from tests.web.runs_support import new_run_form, submit, users
from tests.web.support import log_in, state


@pytest.fixture
def alice_client(client: TestClient) -> TestClient:
    users(client)
    log_in(client, "alice")
    return client


def test_the_form_needs_a_login(client: TestClient) -> None:
    reply = client.get("/tests/run", follow_redirects=False)
    assert reply.status_code == 302
    assert reply.headers["location"] == "/login?next=/tests/run"


def test_the_form_offers_presets_and_loads_its_script(alice_client: TestClient) -> None:
    html = alice_client.get("/tests/run").text
    assert 'data-tc="60+0.6" data-threads="1" data-hash="64"' in html
    assert 'data-elo0="-1.75" data-elo1="0.25"' in html
    assert "/static/new_run.js?v=" in html
    assert "<script>" not in html  # the CSP forbids inline script


def test_the_form_proposes_the_default_book_and_lists_both_kinds(alice_client: TestClient) -> None:
    html = alice_client.get("/tests/run").text
    assert 'name="book" type="text" list="books" value="UHO_Lichess_4852_v1.epd"' in html
    assert '<option value="8moves_v3.pgn">' in html  # the catalogue
    assert '<option value="arbiter-openings-v1.epd">' in html  # hosted here


def test_offline_the_form_proposes_the_book_arbiter_ships(
    settings: Settings,
) -> None:
    """Where workers cannot fetch the catalogue's books, a first test must not name
    one: the primary's check finds them out of reach and the shipped book is proposed."""
    offline = settings.with_changes(books_url=f"http://127.0.0.1:{free_port()}")
    with TestClient(create_app(offline)) as client:
        scheduler = state(client).jobs
        assert scheduler is not None
        checked = scheduler.run_now("check_catalogue_fetchable").result(timeout=60)
        assert checked.last_error is None
        users(client)
        log_in(client, "alice")
        html = client.get("/tests/run").text
    assert 'name="book" type="text" list="books" value="arbiter-openings-v1.epd"' in html


def test_a_valid_submission_creates_a_pending_run(alice_client: TestClient, repo_url: str) -> None:
    form = new_run_form(alice_client, repo_url, info="Faster king safety")
    reply = alice_client.post("/tests/run", data=form, follow_redirects=False)
    assert reply.status_code == 303
    run_id = reply.headers["location"].rsplit("/", 1)[1]
    run = state(alice_client).runs.queries.run(run_id)
    assert (run.username, run.approved, run.args.info) == ("alice", False, "Faster king safety")
    assert (run.args.sprt["elo0"], run.args.sprt["elo1"]) == (0.0, 2.0)
    page = alice_client.get(reply.headers["location"]).text
    assert "It starts once an approver has approved it." in page


def test_presets_win_over_the_fields_without_javascript(
    alice_client: TestClient, repo_url: str
) -> None:
    form = new_run_form(
        alice_client, repo_url, time_preset="ltc", bounds="ltc", tc="1+0.01", elo0="7", elo1="9"
    )
    reply = alice_client.post("/tests/run", data=form, follow_redirects=False)
    run = state(alice_client).runs.queries.run(reply.headers["location"].rsplit("/", 1)[1])
    assert (run.args.tc, run.args.new_options, run.args.base_options) == (
        "60+0.6",
        "Hash=64",
        "Hash=64",
    )
    assert (run.args.sprt["elo0"], run.args.sprt["elo1"]) == (0.5, 2.5)


def test_custom_values_are_taken_as_typed(alice_client: TestClient, repo_url: str) -> None:
    form = new_run_form(
        alice_client,
        repo_url,
        time_preset="custom",
        tc="40/20",
        threads="2",
        new_options="Hash=32 Threads=2",
        bounds="custom",
        elo0="-3",
        elo1="1",
        time_odds="on",
        new_tc="40/30",
        auto_purge="on",
        disable_adjudication="on",
    )
    reply = alice_client.post("/tests/run", data=form, follow_redirects=False)
    run = state(alice_client).runs.queries.run(reply.headers["location"].rsplit("/", 1)[1])
    spec = run.args
    assert (spec.tc, spec.new_tc, spec.threads) == ("40/20", "40/30", 2)
    assert (spec.auto_purge, spec.adjudication) == (True, False)
    assert (spec.sprt["elo0"], spec.sprt["elo1"]) == (-3.0, 1.0)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"time_preset": "custom", "tc": "ten seconds"}, "tc"),
        ({"new_tag": ""}, "new_tag"),
        ({"new_tag": "no-such-branch"}, "new_tag"),
        ({"bounds": "custom", "elo0": "2", "elo1": "1"}, "elo1"),
        ({"stop_rule": "games", "num_games": "3"}, "num_games"),
        (
            {"stop_rule": "spsa", "num_games": "20000", "spsa_raw_params": "K,1,2"},
            "spsa_raw_params",
        ),
        ({"throughput": "1000"}, "throughput"),
        ({"tests_repo": "ext::sh -c evil"}, "tests_repo"),
        ({"book": "../../etc/passwd"}, "book"),
    ],
)
def test_an_error_is_shown_beside_its_field(
    alice_client: TestClient, repo_url: str, overrides: dict[str, str], field: str
) -> None:
    form = new_run_form(alice_client, repo_url, **overrides)
    reply = alice_client.post("/tests/run", data=form)
    assert reply.status_code == 400
    assert f'id="{field}-error"' in reply.text
    assert f'aria-describedby="{field}-error"' in reply.text
    assert state(alice_client).runs.queries.overview().pending == []


def test_a_refused_form_keeps_what_was_typed(alice_client: TestClient, repo_url: str) -> None:
    form = new_run_form(alice_client, repo_url, info="keep me", time_preset="custom", tc="x")
    html = alice_client.post("/tests/run", data=form).text
    assert ">keep me</textarea>" in html
    assert '<option value="custom" selected>' in html


def test_reschedule_prefills_from_an_existing_run(alice_client: TestClient, repo_url: str) -> None:
    alice = state(alice_client).accounts.get_user("alice")
    assert alice is not None
    run_id = submit(
        alice_client,
        alice,
        repo_url,
        tc="60+0.6",
        new_options="Hash=64",
        base_options="Hash=64",
        sprt={"elo0": 0.5, "elo1": 2.5},
        info="again",
    )
    html = alice_client.get(f"/tests/run?id={run_id}").text
    assert f"/tests/view/{run_id}" in html
    assert '<option value="ltc" data-tc="60+0.6" data-threads="1" data-hash="64" selected>' in html
    assert '<option value="ltc" data-elo0="0.5" data-elo1="2.5" selected>' in html
    assert ">again</textarea>" in html
    assert alice_client.get("/tests/run?id=" + "0" * 24).status_code == 404
    assert alice_client.get("/tests/run?id=nonsense").status_code == 404


def test_submission_mapping_follows_the_stop_rule() -> None:
    values = submission.blank_values("https://example.org/sf.git")
    values["stop_rule"] = "spsa"
    values["spsa_raw_params"] = "K,1,0,2,1,0.002"
    raw = submission.submission(values)
    assert "sprt" not in raw
    assert raw["spsa"] == {
        "A": "0.1",
        "alpha": "0.602",
        "gamma": "0.101",
        "raw_params": "K,1,0,2,1,0.002",
    }
    values["stop_rule"] = "games"
    assert "spsa" not in submission.submission(values)
    assert submission.error_field("sprt.elo1") == "elo1"
    assert submission.error_field("run") == "form"


def test_set_option_replaces_hash_whatever_its_case() -> None:
    assert submission.set_option("hash=8 Threads=2", "Hash", "64") == "Hash=64 Threads=2"
    assert submission.set_option("", "Hash", "16") == "Hash=16"


def test_values_from_an_spsa_run_give_the_a_ratio_back() -> None:
    args = {
        "tests_repo": "https://example.org/sf.git",
        "tc": "10+0.1",
        "threads": 1,
        "num_games": 20000,
        "new_options": "",
        "base_options": "",
        "spsa": {"A": 1000, "alpha": 0.602, "gamma": 0.101, "raw_params": "K,1,0,2,1,0.002"},
    }
    values = submission.values_from_run(spec_of(args))
    assert (values["stop_rule"], values["spsa_A"], values["time_preset"]) == (
        "spsa",
        "0.1",
        "custom",
    )


def test_a_full_git_executor_shows_the_form_again_with_retry_after(
    alice_client: TestClient, repo_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    work = state(alice_client).runs.code.work
    release = threading.Event()
    held = [work.submit("alice", lambda: release.wait(30)) for _ in range(work.per_account)]
    try:
        with caplog.at_level(logging.INFO, logger="arbiter.submissions"):
            reply = alice_client.post("/tests/run", data=new_run_form(alice_client, repo_url))
        assert reply.status_code == 429
        assert int(reply.headers["retry-after"]) == work.retry_after
        assert "too many submissions reading repositories at once" in reply.text
        assert 'id="form-error"' in reply.text  # the form again, the values kept
        assert state(alice_client).runs.queries.active_runs() == {}
        logged = [r.getMessage() for r in caplog.records if "submission refused" in r.getMessage()]
        assert len(logged) == 1
        assert logged[0].startswith("submission refused: user=alice host=")
    finally:
        release.set()
        for future in held:
            future.result(10)


def test_autoselect_writes_the_gains_into_the_form(alice_client: TestClient, repo_url: str) -> None:
    """As the reference's checkbox: gains and games for the author to review; no run."""
    params = "A,100,0,200,10,0.002\nB,50,0,100,5,0.002"
    form = new_run_form(
        alice_client, repo_url, stop_rule="spsa", spsa_raw_params=params, autoselect="1"
    )
    reply = alice_client.post("/tests/run", data=form)
    assert reply.status_code == 200
    assert 'id="form-note"' in reply.text
    assert ">A,100,0,200,33.33,0.00737\nB,50,0,100,16.67,0.00737</textarea>" in reply.text
    assert 'name="num_games" type="number" value="159000"' in reply.text
    for name in ("spsa_A", "spsa_alpha", "spsa_gamma"):
        assert f'name="{name}" type="text" value="0"' in reply.text
    assert state(alice_client).runs.queries.live_of("alice") == []
    broken = new_run_form(
        alice_client, repo_url, stop_rule="spsa", spsa_raw_params="A,1,2", autoselect="1"
    )
    refused = alice_client.post("/tests/run", data=broken)
    assert refused.status_code == 400
    assert 'id="spsa_raw_params-error"' in refused.text


def test_an_spsa_run_is_tuned_against_its_own_branch(
    alice_client: TestClient, repo_url: str
) -> None:
    form = new_run_form(
        alice_client,
        repo_url,
        stop_rule="spsa",
        spsa_raw_params="K,1,0,2,1,0.002",
        num_games="4000",
        base_tag="master",
        new_signature="123456",
    )
    reply = alice_client.post("/tests/run", data=form, follow_redirects=False)
    assert reply.status_code == 303, reply.text
    run_id = reply.headers["location"].rsplit("/", 1)[1]
    spec = state(alice_client).runs.queries.run(run_id).args
    assert (spec.base_tag, spec.base_signature) == ("patch", "123456")
