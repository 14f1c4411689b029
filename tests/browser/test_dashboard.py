"""The dashboard in a real browser: a new user's whole path from signup to a
stopped run, the run page updating itself as a worker reports results, form
errors beside their field, and approve kept from non-approvers."""

import re
from pathlib import Path
from typing import Any

import httpx2 as httpx
import msgspec
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.domain.runs.support import pairs, worker
from tests.web.live_server import PASSWORD, Server

pytestmark = pytest.mark.browser

LIVE_WAIT_MS = 25_000  # the run page polls every 15 s


class Worker:
    """Just enough of a worker to report results through the worker API."""

    def __init__(self, server: Server, username: str) -> None:
        self.url = server.url
        self.info = msgspec.to_builtins(worker(username))
        self.run_id = ""
        self.task_id = -1

    def call(self, endpoint: str, **body: Any) -> dict[str, Any]:
        payload = {"password": PASSWORD, "worker_info": self.info, **body}
        reply = httpx.post(f"{self.url}/api/{endpoint}", json=payload, timeout=10.0)
        assert reply.status_code == 200, reply.text
        result: dict[str, Any] = reply.json()
        return result

    def take_task(self) -> None:
        reply = self.call("request_task")
        self.run_id, self.task_id = reply["run"]["_id"], reply["task_id"]

    def report(self, **pentanomial: int) -> None:
        stats = msgspec.to_builtins(pairs(**pentanomial))
        reply = self.call("update_task", run_id=self.run_id, task_id=self.task_id, stats=stats)
        assert reply["task_alive"], reply


def log_in(page: Page, server: Server, username: str) -> None:
    page.goto(f"{server.url}/login")
    page.fill("#username", username)
    page.fill("#password", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    expect(page.locator("header nav")).to_contain_text(username)


def shoot(page: Page, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def test_signup_to_stopped_run(
    browser: Browser, server: Server, repo_url: str, artifacts: Path
) -> None:
    tester = browser.new_context(viewport={"width": 1280, "height": 900})
    approver = browser.new_context(viewport={"width": 1280, "height": 900})
    bob, root = tester.new_page(), approver.new_page()

    # Sign up; an approver accepts the account; log in.
    bob.goto(f"{server.url}/signup")
    bob.fill("#username", "bob")
    bob.fill("#email", "bob@example.org")
    bob.fill("#password", PASSWORD)
    bob.fill("#password2", PASSWORD)
    bob.click("form[action='/signup'] button[type=submit]")
    expect(bob.locator(".flash")).to_contain_text("An approver will review it")
    log_in(root, server, "root")
    root.goto(f"{server.url}/user_management")
    shoot(root, artifacts, "user-management")
    root.click("form[action='/user_management/bob/accept'] button")
    expect(root.locator(".flash")).to_contain_text("bob accepted.")
    log_in(bob, server, "bob")

    # The new test form: a preset fills its fields; a bad value is shown beside its field.
    bob.goto(f"{server.url}/tests/run")
    bob.select_option("#time_preset", "ltc")
    expect(bob.locator("#tc")).to_have_value("60+0.6")
    expect(bob.locator("#new_options")).to_have_value("Hash=64")
    bob.select_option("#time_preset", "stc")
    bob.fill("#tests_repo", repo_url)
    bob.fill("#new_tag", "patch")
    bob.fill("#tc", "ten seconds")  # typing switches the preset to custom
    expect(bob.locator("#time_preset")).to_have_value("custom")
    bob.fill("#info", "Tune king safety")
    bob.click("form.new-run button[type=submit]")
    error = bob.locator("#tc-error")
    expect(error).to_contain_text("is not a time control")
    expect(bob.locator("#tc")).to_have_attribute("aria-describedby", "tc-error")
    assert bob.locator(".field:has(#tc) #tc-error").count() == 1  # beside its field
    shoot(bob, artifacts, "new-test-form-error")
    bob.fill("#tc", "10+0.1")
    bob.click("form.new-run button[type=submit]")
    expect(bob.locator(".flash")).to_contain_text("once an approver has approved it")
    run_url = bob.url
    run_id = run_url.rsplit("/", 1)[1]

    # The submitter is no approver: no button, and a forged request is refused.
    expect(bob.locator("#run-status")).to_have_text("pending")
    assert bob.locator("#approve").count() == 0
    token = bob.locator("input[name=csrf_token]").first.get_attribute("value")
    forged = bob.request.post(f"{run_url}/approve", form={"csrf_token": token or ""})
    assert forged.status == 403

    # The approver approves.
    root.goto(run_url)
    root.click("#approve")
    expect(root.locator(".flash")).to_contain_text("Run approved.")

    # A worker reports results; the open run page follows without a reload.
    bob.goto(run_url)
    bob.bring_to_front()  # the tester is looking at it: the page is visible
    assert bob.evaluate("document.visibilityState") == "visible"
    expect(bob.locator("#result-box")).to_contain_text("Games: 0 ")
    machine = Worker(server, "bob")
    machine.take_task()
    assert machine.run_id == run_id
    machine.report(ld=4, dd=8, wd=4)
    expect(bob.locator("#result-box")).to_contain_text("Games: 32 ", timeout=LIVE_WAIT_MS)
    machine.report(ld=6, dd=16, wd=9, ww=1)
    # Coming back to the tab refreshes at once.
    bob.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(bob.locator("#result-box")).to_contain_text("Games: 64 ", timeout=LIVE_WAIT_MS)
    expect(bob.locator("#llr-chart polyline")).to_have_count(1)
    shoot(bob, artifacts, "run-page")

    # The other pages, as a person sees them.
    for name, path in [
        ("home", "/tests"),
        ("live-elo", f"/tests/live_elo/{run_id}"),
        ("raw-statistics", f"/tests/stats/{run_id}"),
        ("machines", "/machines"),
        ("contributors", "/contributors"),
        ("actions", "/actions"),
        ("sprt-calculator", "/sprt_calc?elo0=0&elo1=2&elo=1"),
    ]:
        bob.goto(server.url + path)
        expect(bob.locator("main h1")).to_be_visible()
        shoot(bob, artifacts, name)

    # The owner stops the run (after confirming).
    bob.goto(run_url)
    bob.once("dialog", lambda dialog: dialog.accept())
    bob.click("#stop")
    expect(bob.locator(".flash")).to_contain_text("Run stopped.")
    expect(bob.locator("#run-status")).to_have_text("finished")
    tester.close()
    approver.close()


def test_the_home_page_refreshes_and_reads_on_a_phone(
    browser: Browser, server: Server, repo_url: str, artifacts: Path
) -> None:
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = phone.new_page()
    log_in(page, server, "root")
    page.goto(f"{server.url}/tests")
    expect(page.locator("#pending .badge")).to_have_text("0")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    # Someone submits a test through the form in another tab.
    other = phone.new_page()
    other.goto(f"{server.url}/tests/run")
    other.fill("#tests_repo", repo_url)
    other.fill("#new_tag", "patch")
    other.click("form.new-run button[type=submit]")
    # Close only once the run's page has loaded: Chromium can drop a close that
    # races a navigation's commit, and page.close() then waits forever
    # (crbug.com/536385539).
    other.wait_for_url(re.compile(r"/tests/view/"))
    expect(other.locator("#run-status")).to_be_visible()
    other.close()
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(page.locator("#pending .badge")).to_have_text("1", timeout=LIVE_WAIT_MS)
    assert any(re.search(r"/tests\?live=1", url) for url in requests)
    assert not any(url.endswith("/tests") for url in requests)  # no page reload
    shoot(page, artifacts, "home-phone")
    phone.close()
