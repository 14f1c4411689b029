"""Browser tests: Playwright drives Debian's Chromium (headless) against a real
`arbiter serve` process. Screenshots of the main pages go to $ARBITER_ARTIFACTS
(default tests/artifacts/, ignored by git).

The browser is the one scripts/find-browser prints (the installer asks it too).
Without one these tests skip, unless ARBITER_TEST_REQUIRE_BROWSER=1 (set by
scripts/test): then a missing browser fails the run, so CI cannot lose them."""

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.live_server import Server, create_user, start_server, stop

FIND_BROWSER = Path(__file__).resolve().parents[2] / "scripts" / "find-browser"


def find_chromium() -> tuple[Path | None, str]:
    """The browser's path, or None and why not."""
    bash = shutil.which("bash") or "/bin/bash"
    found = subprocess.run([bash, str(FIND_BROWSER)], capture_output=True, text=True, check=False)
    if found.returncode != 0:
        return None, found.stderr.strip()
    return Path(found.stdout.strip()), ""


@pytest.fixture(scope="session")
def artifacts() -> Path:
    default = Path(__file__).resolve().parents[1] / "artifacts"
    directory = Path(os.environ.get("ARBITER_ARTIFACTS") or default)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    path, missing = find_chromium()
    if path is None:
        if os.environ.get("ARBITER_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail(f"ARBITER_TEST_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(path), headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A fresh server with one approver, `root`."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    create_user(data_dir, "root", approver=True)
    running = start_server(data_dir, extra_env={"ARBITER_JOBS": "0"})
    yield running
    stop(running)
