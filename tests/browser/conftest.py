"""Browser tests: Playwright drives Debian's Chromium (headless) against a real
`arbiter serve` process. Screenshots of the main pages go to $ARBITER_ARTIFACTS
(default tests/artifacts/, ignored by git)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.live_server import Server, create_user, start_server, stop

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    default = Path(__file__).resolve().parents[1] / "artifacts"
    directory = Path(os.environ.get("ARBITER_ARTIFACTS") or default)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (scripts/install-system-deps)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
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
