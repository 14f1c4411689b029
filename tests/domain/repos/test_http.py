"""The reader over smart HTTP (`git http-backend` on 127.0.0.1, let through by
the allow list): git is pinned to the checked address, and a redirect is not
followed, so it cannot lead git past the policy."""

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from arbiter.domain.repos.cache import RepoCache
from arbiter.domain.repos.reading import CodeReader, CodeUnreadable, GitLimits
from arbiter.protocol.repo_policy import RepoPolicy, parse_allow
from tests.domain.repos.support import GitHttpServer, Stockfishes, Tarpit, make_stockfishes


@pytest.fixture(scope="module")
def sf(tmp_path_factory: pytest.TempPathFactory) -> Stockfishes:
    return make_stockfishes(tmp_path_factory.mktemp("sf"))


@pytest.fixture
def forge(sf: Stockfishes) -> Iterator[GitHttpServer]:
    server = GitHttpServer(Path(sf.fork.removeprefix("file://")).parent)
    yield server
    server.close()


def reader(tmp_path: Path, allow: str) -> CodeReader:
    cache = RepoCache(tmp_path / "cache", max_bytes=1 << 30)
    return CodeReader(RepoPolicy(parse_allow(allow)), cache)


def test_a_fork_over_http_by_a_name_pinned_to_its_checked_address(
    tmp_path: Path, sf: Stockfishes, forge: GitHttpServer
) -> None:
    # "localhost" is looked up once, checked against the allow list, and git is
    # handed that address (http.curloptResolve) instead of looking it up again.
    facts = reader(tmp_path, "localhost").read(forge.url("fork", "localhost"), "master", "patch")
    assert (facts.resolved_base, facts.resolved_new) == (sf.master, sf.patch)
    assert "EvalFileDefaultNameBig" in facts.diff
    assert any("git-upload-pack" in path for path in forge.requests)


def test_loopback_over_http_needs_the_allow_list(tmp_path: Path, forge: GitHttpServer) -> None:
    with pytest.raises(CodeUnreadable, match="http:// is not allowed"):
        reader(tmp_path, "").read(forge.url("fork"), "master", "patch")
    with pytest.raises(CodeUnreadable, match="non-public address"):
        reader(tmp_path, "").read(forge.url("fork").replace("http:", "https:"), "master", "patch")
    assert forge.requests == []  # refused before any connection


def test_redirects_are_not_followed(tmp_path: Path, sf: Stockfishes) -> None:
    tarpit = Tarpit()
    redirector = GitHttpServer(tmp_path, redirect_to=f"http://127.0.0.1:{tarpit.port}")
    try:
        with pytest.raises(CodeUnreadable) as refused:
            reader(tmp_path, "127.0.0.1/32").read(redirector.url("fork"), "master", "patch")
        assert redirector.requests  # git asked the first host...
        assert tarpit.held == []  # ...and never went where it was sent
        assert "301" in refused.value.reason  # the redirect is an error, for the log
    finally:
        redirector.close()
        tarpit.close()


def test_a_closed_port_and_a_silent_one_read_alike(tmp_path: Path) -> None:
    tarpit = Tarpit()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    closed_port = closed.getsockname()[1]
    try:
        cache = RepoCache(tmp_path / "cache", max_bytes=1 << 20)
        policy = RepoPolicy(parse_allow("127.0.0.0/8"))
        read = CodeReader(policy, cache, limits=GitLimits(remote_seconds=1.0))
        messages = []
        for port in (closed_port, tarpit.port):
            with pytest.raises(CodeUnreadable) as failed:
                read.read(f"http://127.0.0.1:{port}/e.git", "master", "patch")
            messages.append(str(failed.value).replace(str(port), "PORT"))
        assert messages[0] == messages[1]
        assert "refused" not in messages[0]
        assert "timed out" not in messages[0]
    finally:
        closed.close()
        tarpit.close()
