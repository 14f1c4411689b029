"""The git runner: a hard timeout that kills git's whole process group, and a
bounded output."""

import time
from pathlib import Path

import pytest

from arbiter.domain.repos.runner import GitFailed, run_git
from arbiter.protocol.repo_policy import RepoPolicy, parse_allow
from tests.domain.repos.support import Tarpit, commit, git


def processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(line)
    return found


def test_a_silent_host_is_cut_at_the_timeout_with_its_helpers() -> None:
    tarpit = Tarpit()
    try:
        target = RepoPolicy(parse_allow("127.0.0.0/8")).check(tarpit.url)
        started = time.monotonic()
        with pytest.raises(GitFailed) as failed:
            run_git(["ls-remote", "--", tarpit.url], timeout=5, target=target)
        elapsed = time.monotonic() - started
        assert failed.value.timed_out
        assert 5 <= elapsed < 15
        assert tarpit.held  # git did connect, and was never answered
        # SIGKILL went to the whole group: git-remote-http is gone too (its exit
        # may take a moment to show on a loaded machine).
        deadline = time.monotonic() + 5
        while processes_mentioning(f"127.0.0.1:{tarpit.port}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_mentioning(f"127.0.0.1:{tarpit.port}") == []
    finally:
        tarpit.close()


def test_output_is_capped(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "big", {"big.txt": "x" * 100_000})
    shown = run_git(["-C", str(repo), "show", "HEAD"], timeout=10, max_output=1000)
    assert shown.truncated
    assert len(shown.stdout) == 1000


def test_transports_are_limited_to_the_targets() -> None:
    # Without a target, git may use no transport at all (not even file://).
    with pytest.raises(GitFailed, match="not allowed"):
        run_git(["ls-remote", "--", "file:///nonexistent"], timeout=10)
