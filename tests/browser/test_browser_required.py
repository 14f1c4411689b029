"""A missing Chromium skips the browser tests only when nobody asked for them:
with ARBITER_TEST_REQUIRE_BROWSER=1 (scripts/test sets it) the run fails."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_browser_tests(tmp_path: Path, require: bool) -> subprocess.CompletedProcess[str]:
    """The dashboard tests, on a PATH that has bash but no chromium."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("bash", "env"):
        link = bin_dir / tool
        if not link.exists():
            link.symlink_to(Path("/usr/bin") / tool)
    env = {key: value for key, value in os.environ.items() if not key.startswith("ARBITER_")}
    env |= {"PATH": str(bin_dir), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    if require:
        env["ARBITER_TEST_REQUIRE_BROWSER"] = "1"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-x"]
    args.append("tests/browser/test_dashboard.py")
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("require", [True, False])
def test_a_missing_browser_fails_only_when_required(tmp_path: Path, require: bool) -> None:
    done = run_browser_tests(tmp_path, require)
    output = done.stdout + done.stderr
    assert "chromium not found on PATH" in output, output
    if require:
        assert done.returncode == 1, output
        assert "ARBITER_TEST_REQUIRE_BROWSER=1 but chromium not found" in output
    else:
        assert done.returncode == 0, output
        assert "skipped" in output
        assert "failed" not in output
        assert "error" not in output
