"""The dashboard pages Fishtest users read every day, at desktop width and at
390 px: finished tests, user pages, rows, the run page's facts, first use with
one approver, and every cell of the named tables visible on a phone."""

import base64
import gzip
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.seed import (
    BUSY_DIFF,
    BUSY_DIFF_COMMAND,
    PENDING_WARNING,
    PLAIN_FINISHED,
    QUARANTINED,
    Seeded,
    seed,
)
from tests.browser.test_dashboard import Worker, log_in, shoot
from tests.web.live_server import PASSWORD, Server, start_server, stop

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
FINISHED = PLAIN_FINISHED + 5

# Every th/td of the tables matched: displayed, with a box, and (scrolled into
# view within its scroll box if it has one) inside the viewport's width. A
# table that reflows into label/value pairs may hide its header row when each
# cell shows its column's label itself. The page itself must not scroll
# sideways. Returns the cells that fail.
CELLS_SHOWN = """
(selector) => {
  const width = document.documentElement.clientWidth;
  const failed = [];
  const cells = document.querySelectorAll(
    selector.split(",").map((s) => `${s} th, ${s} td`).join(","));
  for (const cell of cells) {
    const head = cell.closest("thead");
    const table = cell.closest("table");
    if (head && getComputedStyle(head).display === "none"
        && table.querySelector("td[data-label]")) {
      const labels = Array.from(table.querySelectorAll("tbody tr:first-child td[data-label]"),
        (td) => [td.dataset.label, getComputedStyle(td, "::before").content]);
      const label = cell.textContent.trim();
      const shown = labels.some(([name, content]) => name === label
        && (content.includes(name) || name === "Test"));
      if (!shown) failed.push(`header ${label} neither shown nor repeated`);
      continue;
    }
    const style = getComputedStyle(cell);
    cell.scrollIntoView({ block: "nearest", inline: "nearest" });
    const box = cell.getBoundingClientRect();
    const inside = box.left >= -1 && (box.right <= width + 1 || box.width > width);
    if (style.display === "none" || style.visibility !== "visible" || !box.width
        || !box.height || !inside) {
      failed.push(cell.textContent.trim().slice(0, 40) || cell.tagName);
    }
  }
  window.scrollTo(0, 0);
  const sideways = document.documentElement.scrollWidth > width + 1;
  return { cells: cells.length, failed, sideways };
}
"""


@pytest.fixture
def seeded(tmp_path: Path, repo_url: str) -> Iterator[tuple[Server, Seeded]]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    runs = seed(data_dir, repo_url)
    server = start_server(data_dir, extra_env={"ARBITER_JOBS": "0"})
    yield server, runs
    stop(server)


def diff_lines_are_single_spaced(page: Page) -> None:
    """Each line of the shown diff one line-height below the one before."""
    spans = page.locator("pre.diff span")
    expect(spans).to_have_count(BUSY_DIFF.count("\n"))
    tops = spans.evaluate_all("spans => spans.map((s) => s.getBoundingClientRect().top)")
    height = spans.first.evaluate("s => parseFloat(getComputedStyle(s).lineHeight)")
    steps = [later - earlier for earlier, later in itertools.pairwise(tops)]
    assert all(abs(step - height) < 1 for step in steps), (steps, height)
    box = page.locator("pre.diff").bounding_box()
    assert box is not None
    assert box["height"] < (len(tops) + 1) * height + 20


def filter_button_keeps_its_size(page: Page, form_label: str) -> None:
    """A filter form's button as wide as its text, not stretched across the card."""
    form = page.locator(f"form[aria-label='{form_label}']")
    button = form.locator("button[type=submit]")
    form_box, button_box = form.bounding_box(), button.bounding_box()
    assert form_box is not None
    assert button_box is not None
    assert button_box["width"] < 150, (form_label, button_box["width"], form_box["width"])


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, page.url


def all_cells_shown(page: Page, selector: str) -> None:
    report = page.evaluate(CELLS_SHOWN, selector)
    assert report["cells"] > 0, selector
    assert report["failed"] == [], (selector, report["failed"])
    assert not report["sideways"], f"{page.url} scrolls sideways"


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_pages_at_each_width(
    browser: Browser, seeded: tuple[Server, Seeded], artifacts: Path, width: str
) -> None:
    server, runs = seeded
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h}, is_mobile=width == "phone")
    page = context.new_page()
    machine = Worker(server, "alice")
    reply = machine.call("request_task")
    assert reply.get("run", {}).get("_id") == runs.busy, reply
    machine.run_id, machine.task_id = runs.busy, reply["task_id"]
    machine.report(ld=2, dd=4, wd=6, ww=4)
    pgn = '[Event "Batch 0"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n'
    encoded = base64.b64encode(gzip.compress(pgn.encode())).decode()
    machine.call("upload_pgn", run_id=runs.busy, task_id=machine.task_id, pgn=encoded)
    log_in(page, server, "root")

    # The top bar takes one line of the screen, at any width.
    bar = page.locator("header.topbar").bounding_box()
    assert bar is not None
    assert bar["height"] < 70, bar
    # Navigation: the approver sees the signup waiting; My tests is theirs.
    expect(page.locator("#pending-signups")).to_have_text("1")
    expect(page.locator("#my-tests")).to_have_attribute("href", "/tests/user/root")

    # Before approving: the warnings beside Approve, at the top; nets; a note.
    page.goto(f"{server.url}/tests/view/{runs.alice_pending}")
    expect(page.locator("#approve-warnings")).to_have_text(PENDING_WARNING)
    expect(page.locator("#approve")).to_have_class("warn")
    warnings_box = page.locator("#approve-warnings").bounding_box()
    about_box = page.locator("#run-about").bounding_box()
    assert warnings_box is not None
    assert about_box is not None
    assert warnings_box["y"] < about_box["y"]
    expect(page.locator("#same-signatures")).to_be_visible()
    new_nets = page.locator("section[aria-label=Arguments] tr", has_text="New nets")
    expect(new_nets.locator("td")).to_have_text("nn-0000000000b2.nnue")

    # Home: rows with description, date, links; pending ones approved from the list,
    # a run with warnings only once they were shown.
    page.goto(f"{server.url}/tests")
    pending = page.locator(f"#pending tr[data-run='{runs.alice_pending}']")
    expect(pending.locator("a.row-warnings")).to_have_text("1 warning")
    expect(pending.locator(".description")).to_have_text("Waiting for approval")
    expect(pending.locator("time[title=submitted]")).to_be_visible()
    expect(pending.locator("a.user-link")).to_have_attribute("href", "/tests/user/alice")
    # root is the instance's only approver: their own run can be approved too.
    expect(
        page.locator(f"#pending tr[data-run='{runs.root_pending}'] .row-actions button")
    ).to_have_count(2)
    shown: list[str] = []
    page.once("dialog", lambda dialog: (shown.append(dialog.message), dialog.accept()))
    pending.locator("button", has_text="Approve").click()
    expect(page.locator(".flash")).to_contain_text("Run approved.")
    assert shown == [f"{PENDING_WARNING} Approve anyway?"]
    assert page.url.endswith("/tests")
    expect(page.locator(f"#pending tr[data-run='{runs.alice_pending}']")).to_have_count(0)
    expect(page.locator("#finished h2 .badge")).to_have_text(str(FINISHED))
    page.locator("#active summary").click()  # sections fold
    expect(page.locator("#active table")).to_be_hidden()
    all_cells_shown(page, "table.runs")
    shoot(page, artifacts, f"home-{width}")

    # Finished tests: tabs, totals, pages by cursor, search.
    page.goto(f"{server.url}/tests/finished")
    expect(page.locator("#finished-count")).to_have_text(f"{FINISHED} tests")
    for run_id, colour in runs.colours.items():  # the reference's colours
        cell = page.locator(f"tr[data-run='{run_id}'] td.result-cell")
        expect(cell).to_have_class(re.compile(rf"^result-cell {colour}\s*$"))
    expect(page.locator("a[rel=prev]")).to_have_count(0)
    page.locator("a[rel=next]").first.click()
    expect(page.locator("#finished tbody tr")).to_have_count(FINISHED - 50)
    expect(page.locator("a[rel=next]")).to_have_count(0)
    page.locator("a[rel=prev]").first.click()
    expect(page.locator("#finished tbody tr")).to_have_count(50)
    page.locator(".tabs a[data-tab=green]").click()
    expect(page.locator("#finished-count")).to_have_text("1 test")
    green = page.locator(f"tr[data-run='{runs.green}']")
    expect(green.locator("td.result-cell")).to_have_class("result-cell green")
    expect(green.locator("a", has_text="live Elo")).to_be_visible()
    page.locator(".tabs a[data-tab=yellow]").click()
    expect(page.locator(f"tr[data-run='{runs.yellow}'] td.result-cell")).to_have_class(
        "result-cell yellow"
    )
    page.locator(".tabs a[data-tab=ltc]").click()
    expect(page.locator("#finished tbody tr")).to_have_count(1)
    page.locator(".tabs a[data-tab=all]").click()
    page.fill("#search-text", "KING safety")
    page.fill("#search-user", "ali")
    page.click("form[aria-label='Search finished tests'] button")
    expect(page.locator("#finished-count")).to_have_text("1 test · newest submission first")
    expect(green).to_be_visible()
    shoot(page, artifacts, f"finished-{width}")

    # A user's page, from a user name.
    green.locator("a.user-link").click()
    expect(page.locator("main h1")).to_have_text("Tests by alice")
    expect(page.locator("#finished h2 .badge")).to_have_text(str(FINISHED))
    expect(page.locator(f"#live tr[data-run='{runs.waiting}']")).to_have_count(1)

    # The run page: who, what it repeats, its workers, and why it waits.
    page.goto(f"{server.url}/tests/view/{runs.waiting}")
    expect(page.locator("#run-status")).to_have_text("waiting")
    expect(page.locator("#run-author a")).to_have_attribute("href", "/tests/user/alice")
    expect(page.locator("#run-approver")).to_have_text("root")
    expect(page.locator("#run-rescheduled-from a")).to_have_attribute(
        "href", f"/tests/view/{runs.green}"
    )
    expect(page.locator("#run-workers")).to_have_text("0 active workers with 0 cores")
    expect(page.locator("#run-waiting")).to_be_visible()
    expect(page.locator("#why-no-workers")).to_contain_text("outranked by another run")
    all_cells_shown(page, "section[aria-label=Arguments] table")
    page.goto(f"{server.url}/tests/view/{runs.busy}")
    expect(page.locator("#run-workers")).to_have_text(
        f"1 active worker with {machine.info['concurrency']} core"
        + ("s" if machine.info["concurrency"] != 1 else "")
    )
    all_cells_shown(page, "table.tasks, section[aria-label=Arguments] table")
    expect(page.locator(".follow-line")).to_be_visible()  # finished runs have no prompt
    itp = page.locator("section[aria-label=Arguments] tr", has_text="Internal throughput")
    expect(itp.locator("td")).to_have_text(re.compile(r"^\d+\.\d\d$"))
    # Sharing: every game in one download; a pasted link previews the result.
    download = page.locator("#download-games")
    expect(download).to_be_visible()
    games = page.request.get(server.url + (download.get_attribute("href") or ""))
    assert games.status == 200
    assert gzip.decompress(games.body()).decode() == pgn
    og = page.locator("meta[property='og:description']")
    expect(og).to_have_attribute("content", re.compile(r"^active · Elo: .*Games: 32 W: 14"))
    expect(page.locator("meta[property='og:url']")).to_have_attribute(
        "content", f"{server.url}/tests/view/{runs.busy}"
    )
    shoot(page, artifacts, f"run-page-{width}")
    # The diff: one screen line per line of it; its command copied by a button.
    diff_lines_are_single_spaced(page)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    page.click("button[data-copy=reproduce-command]")
    expect(page.locator("button[data-copy=reproduce-command]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == BUSY_DIFF_COMMAND
    # Tasks: full worker details, a filter by worker, every task, one task's link.
    expect(page.locator("#task-0 .worker-details")).to_contain_text("MiB · Python 3.")
    page.fill("#task-worker", "nobody")
    page.click("form[aria-label='Filter tasks'] button")
    expect(page.locator("#tasks")).to_contain_text("No task of a worker named like that.")
    page.fill("#task-worker", "ALICE")
    page.click("form[aria-label='Filter tasks'] button")
    expect(page.locator("table.tasks tbody tr")).to_have_count(1)
    page.click("#show-all-tasks")
    expect(page.locator("table.tasks tbody tr")).to_have_count(1)
    # SPSA: the gains of the next iteration; the chart's values on hover; a
    # series hidden by its box (and still hidden after a live update).
    page.goto(f"{server.url}/tests/view/{runs.spsa}")
    all_cells_shown(page, "table.spsa")
    expect(page.locator("table.spsa td.spsa-c").first).to_have_text(re.compile(r"^\d"))
    expect(page.locator("table.spsa td.spsa-r").first).to_have_text(re.compile(r"^\d"))
    label = page.locator("#spsa-chart text").first.bounding_box()
    assert label is not None
    assert label["height"] >= 9, label  # readable on a phone too
    no_sideways_scroll(page)
    first_point = page.locator("#spsa-chart [data-series='0'] circle.point").nth(1)
    expect(first_point.locator("title")).to_have_text("Alpha: 0.100 at 50")
    first_point.hover()
    assert first_point.evaluate("p => getComputedStyle(p).fillOpacity") == "1"
    beta = page.locator("#spsa-chart [data-series='1']")
    expect(beta).to_be_visible()
    page.locator("[data-series-for=spsa-chart] input[value='1']").uncheck()
    expect(beta).to_be_hidden()
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    page.wait_for_load_state("networkidle")
    expect(page.locator("#spsa-chart [data-series='1']")).to_be_hidden()
    expect(page.locator("#spsa-chart [data-series='0']")).to_be_visible()
    page.goto(f"{server.url}/tests/stats/{runs.busy}")
    all_cells_shown(page, "table.args")
    page.goto(f"{server.url}/tests/view/{runs.green}")
    expect(page.locator("#run-status")).to_have_text("finished")
    expect(page.locator(".follow-line")).to_have_count(0)
    page.goto(f"{server.url}/tests/live_elo/{runs.green}")
    all_cells_shown(page, "table.args")
    # A shared live Elo link says what the test is, whose, at which time control.
    details = page.locator("section[aria-label=Details] table.args")
    for label, value in (
        ("Submitted by", "alice"),
        ("Time control", "60+0.6, 1 thread"),
        ("Description", "Tune king safety"),
        ("LOS", "%"),
    ):
        expect(details.locator("tr", has_text=label).locator("td")).to_contain_text(value)
    expect(details.locator("tr", has_text="Commit message")).to_have_count(1)
    page.goto(f"{server.url}/actions")
    all_cells_shown(page, "table.actions-log")
    # Contributors: summary cards, sorting, going to a user.
    page.goto(f"{server.url}/contributors")
    expect(page.locator("table.contributors a", has_text="alice")).to_have_attribute(
        "href", "/tests/user/alice"
    )
    expect(page.locator("#sum-testers")).to_have_text("1")
    expect(page.locator("#sum-developers")).to_have_text("2")
    expect(page.locator("#sum-games")).to_have_text("32")
    page.click("th a[data-sort=games]")
    expect(page.locator("th a[data-sort=games]")).to_have_attribute("aria-sort", "descending")
    page.fill("#contributor-user", "ALICE")
    page.click("form[aria-label='Find a contributor'] button")
    expect(page.locator("#contributor-alice")).to_have_class(re.compile(r"\bhighlight\b"))
    page.click("#contributors-me")  # root has tests and no games: listed too
    expect(page.locator("#contributor-root")).to_have_class(re.compile(r"\bhighlight\b"))
    expect(page.locator("#contributor-root td:nth-child(6)")).to_have_text("0")
    # ... and one's profile says the same of oneself, with the registration date.
    page.goto(f"{server.url}/user")
    expect(page.locator("#profile-facts")).to_contain_text("0 games · 0.0 CPU hours · 1 test")
    health = page.locator("#my-machines-health")  # as the health check last found them
    expect(health.locator("tbody tr")).to_have_count(2)
    expect(health.locator("tfoot")).to_contain_text("63,000")
    expect(health.locator("tbody tr").first).to_contain_text("0.81 / 0.66")
    all_cells_shown(page, "table.machine-health")
    expect(page.locator("#profile-facts time")).to_be_visible()
    page.goto(f"{server.url}/contributors")
    page.fill("#contributor-user", "dave")
    page.click("form[aria-label='Find a contributor'] button")
    expect(page.locator("#contributor-missing")).to_contain_text("dave has no games or tests yet")
    all_cells_shown(page, "table.contributors, .cards")

    # Machines: filter, my workers, sort, refreshed while visible.
    page.goto(f"{server.url}/machines")
    all_cells_shown(page, "table.machines")
    filter_button_keeps_its_size(page, "Filter machines")
    with page.expect_request(re.compile(r"/machines\?live=1")):
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    page.click("th a[data-sort=user]")
    expect(page.locator("th a[data-sort=user]")).to_have_attribute("aria-sort", "descending")
    page.fill("#machine-filter", "nobody")
    page.click("form[aria-label='Filter machines'] button")
    expect(page.locator("#machines-live")).to_contain_text("No machine matches.")
    page.fill("#machine-filter", "")
    page.check("#machines-mine")  # root's own: none
    page.click("form[aria-label='Filter machines'] button")
    expect(page.locator("#machines-count .badge")).to_have_text("0")
    page.fill("#machine-filter", "ALI")
    page.uncheck("#machines-mine")
    page.click("form[aria-label='Filter machines'] button")
    expect(page.locator("table.machines tbody tr")).to_have_count(1)
    # ... and the home page's summary of them, folded until opened.
    page.goto(f"{server.url}/tests")
    expect(page.locator("#machines .badge")).to_have_text("1")
    expect(page.locator("table.machines-summary")).to_be_hidden()
    page.locator("#machines summary").click()
    expect(page.locator("table.machines-summary tbody tr")).to_have_count(1)

    # The event log links a task's event to that task, highlighted on its page.
    machine.call("failed_task", run_id=runs.busy, task_id=machine.task_id, message="no disk")
    page.goto(f"{server.url}/actions?run_id={runs.busy}")
    page.locator("a.task-link").first.click()
    expect(page.locator(f"#task-{machine.task_id}")).to_have_class(re.compile(r"\bhighlight\b"))
    expect(page.locator(f"#task-{machine.task_id}")).to_be_in_viewport()
    # ... and the run page says why its workers gave up, without the event log.
    failures = page.locator("#recent-failures")
    expect(failures).to_contain_text(f"task {machine.task_id}: no disk")
    expect(failures.locator("a")).to_have_attribute(
        "href", f"/actions?run_id={runs.busy}&action=failed_task"
    )

    # First use: root approves their own run (the only approver).
    page.goto(f"{server.url}/tests/view/{runs.root_pending}")
    page.click("#approve")
    expect(page.locator(".flash")).to_contain_text("Run approved.")
    # The form's numeric attributes reach the browser as written.
    page.goto(f"{server.url}/tests/run")
    expect(page.locator("#threads")).to_have_attribute("min", "1")
    expect(page.locator("#num_games")).to_have_attribute("step", "2")
    expect(page.locator("#elo0")).to_have_attribute("inputmode", "decimal")
    # User management: counts, search, every control on screen, and asking first.
    page.goto(f"{server.url}/user_management")
    expect(page.locator("#count-pending")).to_have_text("1")
    all_cells_shown(page, "table.users")
    page.fill("#user-search", "DAV")
    page.click("form[aria-label='Find users'] button")
    expect(page.locator("#users-shown")).to_have_text("1 of 1 pending user")
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#user-dave form[action$='/reject'] button")
    expect(page.locator("#user-dave")).to_be_visible()  # dismissed: nothing done
    assert asked == ["Reject dave's signup? The account is removed."]
    page.goto(f"{server.url}/user_management?group=all&sort=user")
    all_cells_shown(page, "table.users")
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#user-alice form[action$='/block'] button")
    expect(page.locator("#user-alice td[data-label=Status]")).to_have_text("active")
    assert asked[-1].startswith("Block alice?")
    # Nets: the filters laid out as every other page's.
    page.goto(f"{server.url}/nns")
    expect(page.locator("form[aria-label='Filter nets']")).to_have_class("filters-form card")
    filter_button_keeps_its_size(page, "Filter nets")
    # A deleted run's page stays (the event log links to it), with a note.
    page.goto(f"{server.url}/tests/view/{runs.yellow}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete")
    page.wait_for_url(f"{server.url}/tests")
    page.goto(f"{server.url}/tests/view/{runs.yellow}")
    expect(page.locator("#run-status")).to_have_text("deleted")
    expect(page.locator("#run-deleted")).to_be_visible()
    expect(page.locator("#delete")).to_have_count(0)
    context.close()


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_tools_at_each_width(
    browser: Browser, seeded: tuple[Server, Seeded], artifacts: Path, width: str
) -> None:
    """The event log's search, a machine's page, the raw statistics' bounds and
    the SPRT calculator's models, every control on screen."""
    server, runs = seeded
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h}, is_mobile=width == "phone")
    page = context.new_page()
    log_in(page, server, "root")

    # The event log: how many match, part of a name, words, either order.
    page.goto(f"{server.url}/actions")
    shown = page.locator("#actions-shown")
    expect(shown).to_contain_text(re.compile(r"^\d+ of \d+ matching actions"))
    all_cells_shown(page, "table.actions-log")
    page.fill("#user", "OO")
    page.select_option("#action", "approve_run")
    page.click("form[aria-label='Filter the log'] button")
    expect(shown).to_contain_text("· user root ·")
    rows = page.locator("table.actions-log tbody tr")
    approvals = rows.count()
    assert approvals >= 5
    target = rows.first.locator("td:nth-child(4) a").first.inner_text()
    page.fill("#text", target.upper())
    page.click("form[aria-label='Filter the log'] button")
    expect(rows).to_have_count(1)
    expect(shown).to_contain_text("1 of the actions holding these words")
    page.fill("#text", "")
    page.click("form[aria-label='Filter the log'] button")
    newest = rows.first.locator("time").inner_text()
    page.click("th a[data-sort=time]")
    expect(page.locator("th a[data-sort=time]")).to_have_attribute("aria-sort", "ascending")
    expect(rows).to_have_count(approvals)
    assert rows.last.locator("time").inner_text() == newest
    filter_button_keeps_its_size(page, "Filter the log")
    no_sideways_scroll(page)
    shoot(page, artifacts, f"actions-{width}")

    # SPSA authoring: the base follows the test branch; Autoselect fills the gains in.
    page.goto(f"{server.url}/tests/run")
    page.fill("#new_tag", "tune-king")
    page.check("input[name=stop_rule][value=spsa]")
    expect(page.locator("#base_tag")).to_have_value("tune-king")
    expect(page.locator("#base_tag")).to_have_attribute("readonly", "")
    page.fill("#new_tag", "tune-queen")
    expect(page.locator("#base_tag")).to_have_value("tune-queen")
    page.fill("#spsa_raw_params", "A,100,0,200,10,0.002\nB,50,0,100,5,0.002")
    page.click("#autoselect")
    expect(page.locator("#form-note")).to_contain_text("Autoselected")
    expect(page.locator("#spsa_raw_params")).to_have_value(
        "A,100,0,200,33.33,0.00737\nB,50,0,100,16.67,0.00737"
    )
    expect(page.locator("#num_games")).to_have_value("159000")
    no_sideways_scroll(page)
    page.check("input[name=stop_rule][value=sprt]")  # another rule: the base is the author's
    expect(page.locator("#base_tag")).not_to_have_attribute("readonly", "")
    # ... and its chart: values, smoothed, kept by the live refresh.
    page.goto(f"{server.url}/tests/view/{runs.spsa}")
    page.select_option("#spsa_view", "values")
    page.select_option("#spsa_smooth", "3")
    page.click("form[aria-label='SPSA chart view'] button")
    expect(page.locator("#spsa-chart title").first).to_have_text(
        "SPSA parameters: values, smoothed (3)"
    )
    expect(page.locator("#run-live")).to_have_attribute(
        "data-live-src", re.compile(r"spsa_view=values&spsa_smooth=3")
    )
    no_sideways_scroll(page)

    # Quarantined machines: the queue with the evidence; an approver releases one.
    page.goto(f"{server.url}/workers")
    bad = page.locator(f"#quarantine-{QUARANTINED.worker_name}")
    expect(bad.locator(".evidence li")).to_have_count(3)
    expect(bad.locator(".evidence li").first).to_contain_text("by carol: crashes, 12 crashes")
    no_sideways_scroll(page)
    page.once("dialog", lambda dialog: dialog.accept())
    bad.locator("button", has_text="Release").click()
    expect(page.locator(".flash")).to_contain_text("released from quarantine")
    expect(page.locator("#worker-health")).to_contain_text("Released by root")
    page.goto(f"{server.url}/workers")
    expect(page.locator("#quarantined")).to_contain_text("No machine is quarantined.")

    # Every page of the site fits the screen: nothing scrolls the page sideways.
    for path in (
        "/tests",
        "/tests/finished",
        "/tests/user/alice",
        f"/tests/view/{runs.busy}",
        f"/tests/view/{runs.spsa}",
        f"/tests/stats/{runs.green}",
        f"/tests/live_elo/{runs.green}",
        "/tests/run",
        "/actions",
        "/contributors",
        "/contributors/monthly",
        "/machines",
        "/workers",
        "/workers/alice-4cores-0f0f0f0f",
        "/sprt_calc",
        "/user",
        "/user/notifications",
        "/user_management",
        "/nns",
        "/books",
        "/upload",
    ):
        page.goto(server.url + path)
        no_sideways_scroll(page)

    # A worker whose files differ from its install is marked as the reference marks it.
    modified = Worker(server, "alice")
    modified.info["modified"] = True
    modified.take_task()
    page.goto(f"{server.url}/machines")
    version = str(modified.info["version"])
    expect(page.locator("table.machines td", has_text=f"{version}*")).to_have_count(1)
    # ... and its page shows its latest runs: its health over time.
    page.goto(f"{server.url}/workers/alice-4cores-abcd")
    expect(page.locator("#worker-history tbody tr")).to_have_count(1)
    no_sideways_scroll(page)

    # Signing up: the browser proves its work while the form is filled, and a
    # form sent before it is done goes once the proof is ready.
    visitor = browser.new_context(viewport={"width": w, "height": h}, is_mobile=width == "phone")
    newcomer = visitor.new_page()
    newcomer.goto(f"{server.url}/signup")
    newcomer.fill("#username", f"erin{width}")
    newcomer.fill("#email", "erin@example.org")
    newcomer.fill("#password", PASSWORD)
    newcomer.fill("#password2", PASSWORD)
    newcomer.click("form[action='/signup'] button[type=submit]")
    expect(newcomer.locator(".flash")).to_contain_text("An approver will review it")
    no_sideways_scroll(newcomer)
    visitor.close()

    # A machine never seen says so; a name no account owns is not guessed at.
    page.goto(f"{server.url}/workers/alice-4cores-0f0f0f0f")
    expect(page.locator("#worker-status")).to_have_text("never seen here")
    expect(page.locator("#worker-unseen")).to_be_visible()
    missing = page.goto(f"{server.url}/workers/nobody-4cores-0f0f0f0f")
    assert missing is not None
    assert missing.status == 404
    expect(page.locator("main")).to_contain_text("No account is named nobody")

    # Raw statistics: the bounds in the four models, on screen at any width.
    page.goto(f"{server.url}/tests/stats/{runs.green}")
    bounds = page.locator("section[aria-label='SPRT bounds in each model']")
    expect(bounds.locator("thead th")).to_have_text(
        ["", "Logistic", "Normalized", "BayesElo", "Score"]
    )
    expect(bounds.locator("tbody tr").nth(1).locator("td").nth(1)).to_have_text("2.000")
    all_cells_shown(page, "table.bounds, table.args")

    # The SPRT calculator in the logistic model, and a refusal beside its field.
    page.goto(f"{server.url}/sprt_calc")
    page.select_option("#elo_model", "logistic")
    page.fill("#elo", "1")
    page.click("form[aria-label=SPRT] button")
    expect(page.locator("#forecast")).to_contain_text("passes with probability 50.0%")
    expect(page.locator("#bounds-in-models")).to_contain_text("logistic Elo [0.00, 2.00]")
    page.fill("#draw_ratio", "0.9")
    page.click("form[aria-label=SPRT] button")
    expect(page.locator("#rms_bias-error")).to_contain_text("not compatible")
    no_sideways_scroll(page)
    context.close()


def test_the_run_page_says_why_approve_is_missing(
    browser: Browser, seeded: tuple[Server, Seeded]
) -> None:
    server, runs = seeded
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    page.goto(f"{server.url}/tests/view/{runs.alice_pending}")
    expect(page.locator("#approve-why")).to_contain_text("Log in as an approver")
    log_in(page, server, "alice")
    page.goto(f"{server.url}/tests/view/{runs.alice_pending}")
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#approve-why")).to_contain_text("only approvers may approve")
    expect(page.locator("#approve-why")).to_be_in_viewport()
    context.close()


@pytest.mark.parametrize("width", list(WIDTHS))
def test_first_use_with_one_account(
    browser: Browser, server: Server, repo_url: str, width: str
) -> None:
    """The README's flow: the only account (an approver) submits a test, approves
    it itself, and a worker plays it."""
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h}, is_mobile=width == "phone")
    page = context.new_page()
    log_in(page, server, "root")
    page.goto(f"{server.url}/tests/run")
    page.fill("#tests_repo", repo_url)
    page.fill("#new_tag", "patch")
    page.click("form.new-run button[type=submit]")
    expect(page.locator("#run-status")).to_have_text("pending")
    expect(page.locator("#approve-why")).to_have_count(0)
    page.click("#approve")
    expect(page.locator(".flash")).to_contain_text("Run approved.")
    expect(page.locator("#run-status")).to_have_text("waiting")
    expect(page.locator("#run-waiting")).to_be_visible()
    machine = Worker(server, "root")
    machine.take_task()
    assert machine.run_id == page.url.rsplit("/", 1)[1]
    page.reload()
    expect(page.locator("#run-status")).to_have_text("active")
    expect(page.locator("#run-workers")).to_contain_text("1 active worker with")
    context.close()
