"""The README's first test on one machine, followed literally: its shell blocks run
as written (in a directory laid out as the checkout), its browser steps in
Chromium, and the test must finish with no network at all.

Only the port differs: the server listens on a free one (ARBITER_PORT) and the
worker's `--server` URL is rewritten to match, so parallel test processes do
not collide on 8000. ARBITER_BOOKS_URL points at a closed port, so the books
repository is out of reach whether or not this machine has internet."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.web.live_server import CHEAP_HASHING, Server, free_port, wait_until_serving
from tests.worker.support import needs_stockfish

CHECKOUT = Path(__file__).resolve().parents[2]
SECTION = "### A first test on this machine alone"
FINISH_SECONDS = 600.0  # a hang guard: on a quiet machine it takes well under a minute


def readme_blocks() -> list[str]:
    """The shell blocks of the README's first-test section, in order."""
    text = (CHECKOUT / "README.md").read_text()
    section = text[text.index(SECTION) :]
    after = re.search(r"^(#|\*\*)", section[len(SECTION) :], flags=re.MULTILINE)
    assert after is not None
    section = section[: len(SECTION) + after.start()]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)


def checkout_copy(directory: Path) -> Path:
    """A directory the README's relative commands work in: the checkout's scripts
    and project file, and this interpreter's environment as `.venv` (installed by
    scripts/venv, whose stamp says nothing is left to install)."""
    for name in ("scripts", "pyproject.toml"):
        (directory / name).symlink_to(CHECKOUT / name)
    (directory / ".venv").symlink_to(Path(sys.prefix))
    if not list(Path(sys.prefix).glob(".installed-*")):
        pytest.fail(f"{sys.prefix} was not installed by scripts/venv: run the suite from it")
    return directory


def shell(command: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def background(command: str, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as sink:
        return subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def end(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def submit_as_printed(page: Page, url: str, password: str, printed: str) -> str:
    """Log in, fill "New test" with what `arbiter sample-engine` printed, submit and
    approve; the run's id."""
    page.goto(f"{url}/login")
    page.fill("#username", "alice")
    page.fill("#password", password)
    page.click("form[action='/login'] button[type=submit]")
    expect(page.locator("header nav")).to_contain_text("alice")
    page.goto(f"{url}/tests/run")
    fields = {
        "#tests_repo": r"Tests repository (\S+),",
        "#new_tag": r"Test branch (\S+),",
        "#base_tag": r"Base branch (\S+),",
        "#tc": r"Time control (\S+) ",
        "stop rule": r"Stop rule: (Fixed number of games),",
        "#num_games": r"Number of games (\d+)",
    }
    for selector, pattern in fields.items():
        found = re.search(pattern, printed)
        assert found is not None, (pattern, printed)
        if selector == "stop rule":  # a radio button, shown by its label
            page.get_by_label(found.group(1)).check()
        else:
            page.fill(selector, found.group(1))
    page.click("form.new-run button[type=submit]")
    expect(page.locator("#run-status")).to_have_text("pending")
    page.click("#approve")
    expect(page.locator(".flash")).to_contain_text("Run approved.")
    return page.url.rsplit("/", 1)[1]


def test_a_newcomer_finishes_a_first_test_offline(browser: Browser, tmp_path: Path) -> None:
    needs_stockfish()
    serve, setup, start_worker = readme_blocks()
    (tmp_path / "arbiter").mkdir()
    directory = checkout_copy(tmp_path / "arbiter")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The books repository is out of reach, as on a machine without internet.
    offline = {"ARBITER_BOOKS_URL": f"http://127.0.0.1:{free_port()}"}
    env = {**os.environ, **CHEAP_HASHING, **offline, "ARBITER_PORT": str(port)}
    for variable in ("ARBITER_GIT_ALLOW", "ARBITER_WORKER_GIT_ALLOW", "ARBITER_DATA_DIR"):
        env.pop(variable, None)  # only what the README says
    server = background(serve.strip(), directory, env, tmp_path / "server.log")
    worker: subprocess.Popen[str] | None = None
    try:
        # The first start may install into .venv: a longer guard than a test server's.
        wait_until_serving(Server(server, url, tmp_path / "server.log"), timeout=300)
        printed = shell(setup, directory, env)
        password = re.search(r"echo '([^']+)'", setup)
        assert password is not None
        context = browser.new_context()
        run_id = submit_as_printed(context.new_page(), url, password.group(1), printed)
        command = start_worker.strip().replace("http://127.0.0.1:8000", url)
        worker = background(command, directory, env, tmp_path / "worker.log")
        run = finished(url, run_id, worker, tmp_path / "worker.log")
        context.close()
    finally:
        if worker is not None:
            end(worker)
        end(server)
    assert run["args"]["book"] == "arbiter-openings-v1.epd"  # the book that needs no network
    results = run["results"]
    assert results["wins"] + results["losses"] + results["draws"] == run["args"]["num_games"]
    assert (directory / "arbiter-data").is_dir()  # where the README's commands put it


def finished(url: str, run_id: str, worker: subprocess.Popen[str], log: Path) -> dict[str, object]:
    deadline = time.monotonic() + FINISH_SECONDS
    while time.monotonic() < deadline:
        run: dict[str, object] = httpx.get(f"{url}/api/get_run/{run_id}", timeout=10.0).json()
        if run["finished"]:
            return run
        assert worker.poll() is None, log.read_text()
        time.sleep(1.0)  # games take seconds; nothing to wait on but the run's state
    raise AssertionError(f"the run did not finish:\n{log.read_text()}")
