"""Follow and notify, and webhooks, in Chromium at desktop width and 390 px: a
bell follows a run, a browser notification (the Notification API) says when it
finishes, and a webhook registered on the profile page is delivered, signed,
by the jobs executor to a receiver on loopback, with its delivery log."""

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from arbiter.storage import Storage
from arbiter.storage.engine import make_engine, sqlite_url
from arbiter.storage.records import QuarantineRecord
from tests.browser.seed import Seeded, seed
from tests.browser.test_dashboard import log_in, shoot
from tests.domain.webhook_receiver import Receiver, receiver
from tests.web.live_server import Server, start_server, stop

pytestmark = pytest.mark.browser

HANG_GUARD = 60.0  # seconds; each wait ends on its event, in a second or two when quiet
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
JOBS = {
    "ARBITER_JOBS": "1",
    "ARBITER_WEBHOOK_PERIOD_SECONDS": "1",
    "ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",  # the receiver is on loopback
}
# Every notification the page shows, kept across page loads.
RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  class Recorded extends Real {
    constructor(title, options) {
      super(title, options);
      const notes = JSON.parse(localStorage.getItem("test.notes") || "[]");
      notes.push(title);
      localStorage.setItem("test.notes", JSON.stringify(notes));
    }
  }
  window.Notification = Recorded;
})();
"""


@pytest.fixture
def seeded(tmp_path: Path, repo_url: str) -> Iterator[tuple[Server, Seeded]]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    runs = seed(data_dir, repo_url)
    server = start_server(data_dir, extra_env=JOBS)
    yield server, runs
    stop(server)


@pytest.fixture
def sink() -> Iterator[Receiver]:
    with receiver() as found:
        yield found


@pytest.mark.parametrize("width", list(WIDTHS))
def test_follow_notify_and_a_webhook(
    browser: Browser,
    seeded: tuple[Server, Seeded],
    sink: Receiver,
    artifacts: Path,
    tmp_path: Path,
    width: str,
) -> None:
    server, runs = seeded
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h}, is_mobile=width == "phone")
    context.grant_permissions(["notifications"], origin=server.url)
    context.add_init_script(RECORD_NOTIFICATIONS)
    page = context.new_page()
    log_in(page, server, "root")

    # A webhook for the runs root follows: finished and stopped, generic JSON.
    page.goto(f"{server.url}/user")
    page.fill("#hook-url", sink.url)
    page.check("#hook-event-stopped")
    page.click("#add-webhook")
    expect(page.locator(".flash")).to_contain_text("Webhook added.")
    secret = page.locator(".hook-secret").first.text_content() or ""
    # A refused one says why beside its field.
    page.fill("#hook-url", "ftp://example.org/")
    page.click("#add-webhook")
    expect(page.locator("#url-error")).to_contain_text("https://")

    # The bell on a row follows alice's waiting run.
    page.goto(f"{server.url}/tests")
    bell = page.locator(f"#paused button[data-bell='{runs.waiting}']")
    expect(bell).to_have_attribute("aria-pressed", "false")
    bell.click()
    bell = page.locator(f"#paused button[data-bell='{runs.waiting}']")
    expect(bell).to_have_attribute("aria-pressed", "true")
    assert page.evaluate("localStorage.getItem('arbiter.notifiedSince')")  # the first check

    # The run is stopped; the followers' page tells them at its next check.
    page.goto(f"{server.url}/tests/view/{runs.waiting}")
    expect(page.locator("#run-about")).to_contain_text("You follow this test.")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#stop")
    expect(page.locator(".flash")).to_contain_text("Run stopped.")
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    deadline = time.monotonic() + HANG_GUARD
    notes: list[str] = []
    while time.monotonic() < deadline and not notes:
        notes = json.loads(page.evaluate("localStorage.getItem('test.notes') || '[]'"))
        page.wait_for_timeout(200)
    assert notes == ["Test finished: patch vs master"]

    # A machine the health check quarantines now: the approver hears of it too.
    quarantine_now(tmp_path / "data", f"root-4cores-{width[:4]}0001")
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline and len(notes) < 2:
        notes = json.loads(page.evaluate("localStorage.getItem('test.notes') || '[]'"))
        page.wait_for_timeout(200)
    assert notes[1:] == [f"Machine quarantined: root-4cores-{width[:4]}0001"]

    # The webhook arrives, signed, from the jobs executor.
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline and not sink.requests:
        time.sleep(0.2)
    (delivery,) = sink.requests
    document = json.loads(delivery.body)
    assert (document["event"], document["run"]["id"]) == ("stopped", runs.waiting)
    expected = "sha256=" + hmac.new(secret.encode(), delivery.body, hashlib.sha256).hexdigest()
    assert delivery.headers["X-Arbiter-Signature"] == expected
    # The receiver has the POST before it answers, and the delivery is marked
    # delivered after the answer, in a transaction of its own: the static page
    # shows it once that transaction is in, so it is loaded again until then.
    row = page.locator("table.deliveries tbody tr").first
    deadline = time.monotonic() + HANG_GUARD
    while True:
        page.goto(f"{server.url}/user#webhooks")
        expect(row).to_contain_text("stopped")
        if row.locator("td.delivery-delivered").count():  # count() does not wait
            break
        assert time.monotonic() < deadline, row.text_content()
        page.wait_for_timeout(200)
    expect(row.locator("td.delivery-delivered")).to_have_text("delivered")
    expect(row).to_be_visible()
    shoot(page, artifacts, f"webhooks-{width}")
    context.close()


def quarantine_now(data_dir: Path, name: str) -> None:
    """A quarantine written to the live server's database, as its job would."""
    evidence = [{"run_id": "0" * 24, "author": "carol", "kind": "crashes", "detail": "12"}]
    engine = make_engine(sqlite_url(data_dir), pool_size=1)
    try:
        with Storage(engine).write() as tx:
            tx.quarantine.put(QuarantineRecord(name, True, time.time(), evidence, []))
    finally:
        engine.dispose()
