"""The repository URL policy on plain values: names resolve through a table,
never through the network, and nothing connects anywhere."""

import ipaddress
from collections.abc import Sequence

import pytest

from arbiter.protocol.repo_policy import (
    RepoPolicy,
    RepoRefused,
    embedded_ipv4,
    is_github_repository,
    parse_allow,
    split_url,
)

ADDRESSES = {
    "forge.example": ["140.82.112.3"],
    "v6.example": ["2606:50c0:8000::153"],
    "loop.example": ["127.0.0.1"],
    "lan.example": ["192.168.1.20"],
    "ten.example": ["10.1.2.3"],
    "cgnat.example": ["100.64.0.9"],
    "meta.example": ["169.254.169.254"],
    "v6local.example": ["fe80::1"],
    "v6ula.example": ["fd00::5"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "sixtofour.example": ["2002:7f00:1::1"],  # 6to4 of 127.0.0.1
    "nat64.example": ["64:ff9b::a00:5"],  # NAT64 of 10.0.0.5
    "teredo.example": ["2001:0:4136:e378:8000:63bf:f5ff:fffe"],  # Teredo client 10.0.0.1
    "public6to4.example": ["2002:8c52:7003::1"],  # 6to4 of 140.82.112.3
    "zero.example": ["0.0.0.0"],  # noqa: S104 - a value, never bound
    "multi.example": ["140.82.112.3", "10.0.0.8"],  # one bad answer spoils the name
    "git.corp": ["10.20.0.5"],
}


def table(host: str, port: int) -> Sequence[str]:
    if host in ADDRESSES:
        return ADDRESSES[host]
    raise RepoRefused(f"the host {host} could not be resolved")


def check(url: str, allow: str = "", ssh: bool = False) -> tuple[str, ...]:
    return RepoPolicy(parse_allow(allow), ssh=ssh).check(url, table).addresses


def test_public_https_is_admitted_and_pinned() -> None:
    target = RepoPolicy().check("https://forge.example/o/engine", table)
    assert target.addresses == ("140.82.112.3",)
    config = target.git_config()
    assert "http.followRedirects=false" in config
    assert "http.curloptResolve=forge.example:443:140.82.112.3" in config
    assert "protocol.allow=never" in config
    assert "protocol.https.allow=always" in config


def test_public_ipv6_is_pinned_in_brackets() -> None:
    target = RepoPolicy().check("https://v6.example:8443/e", table)
    assert "http.curloptResolve=v6.example:8443:[2606:50c0:8000::153]" in target.git_config()


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://loop.example/e", "loopback"),
        ("https://127.0.0.1/e", "loopback"),
        ("https://[::1]/e", "loopback"),
        ("https://mapped.example/e", "loopback"),
        ("https://sixtofour.example/e", "loopback"),
        ("https://[2002:7f00:1::1]/e", "loopback"),
        ("https://nat64.example/e", "private"),
        ("https://teredo.example/e", "private"),
        ("https://lan.example/e", "private"),
        ("https://ten.example/e", "private"),
        ("https://v6ula.example/e", "private"),
        ("https://meta.example/e", "link-local"),
        ("https://v6local.example/e", "link-local"),
        ("https://multi.example/e", "private"),
        ("https://cgnat.example/e", "non-public"),
        ("https://zero.example/e", "non-public"),
    ],
)
def test_non_public_addresses_are_refused(url: str, kind: str) -> None:
    with pytest.raises(RepoRefused) as refused:
        check(url)
    assert "non-public address" in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "file:///srv/engine",
        "http://forge.example/e",
        "git://forge.example/e",
        "ssh://git@forge.example/e",
        "git@forge.example:o/e.git",
        "ext::sh -c touch% /tmp/x",
        "ftp://forge.example/e",
        "https://no-such.example/e",
        "https://-x.example/e",
    ],
)
def test_other_transports_and_bad_hosts_are_refused(url: str) -> None:
    with pytest.raises(RepoRefused):
        check(url)


def test_messages_never_mention_ports_or_connections() -> None:
    for url in ("https://loop.example:22/e", "https://lan.example:6379/e"):
        with pytest.raises(RepoRefused) as refused:
            check(url)
        assert "22" not in str(refused.value)
        assert "6379" not in str(refused.value)
        assert "open" not in str(refused.value)
        assert "closed" not in str(refused.value)


def test_allow_list_admits_named_hosts_ranges_and_files() -> None:
    assert check("https://git.corp/e", allow="git.corp") == ("10.20.0.5",)
    assert check("https://git.corp/e", allow="10.0.0.0/8") == ("10.20.0.5",)
    assert check("http://loop.example:8080/e", allow="127.0.0.0/8") == ("127.0.0.1",)
    assert check("git://git.corp/e", allow="git.corp") == ("10.20.0.5",)
    assert RepoPolicy(parse_allow("file")).check("file:///srv/e", table).scheme == "file"
    with pytest.raises(RepoRefused):
        check("https://lan.example/e", allow="10.0.0.0/8")  # 192.168 is not in it
    with pytest.raises(RepoRefused):
        check("git://git.corp/e", allow="10.0.0.0/8")  # git:// cannot be pinned: names only


def test_a_refused_file_url_names_the_setting_that_allows_it() -> None:
    with pytest.raises(RepoRefused, match=r"\(ARBITER_GIT_ALLOW=file allows them\)"):
        RepoPolicy().check("file:///srv/e", table)
    worker = RepoPolicy(allow_setting="ARBITER_WORKER_GIT_ALLOW")
    with pytest.raises(RepoRefused, match=r"\(ARBITER_WORKER_GIT_ALLOW=file allows them\)"):
        worker.check("file:///srv/e", table)


def test_ssh_only_when_enabled_and_pinned() -> None:
    target = RepoPolicy(ssh=True).check("git@forge.example:o/e.git", table)
    assert "-o HostName=140.82.112.3" in target.ssh_command()
    assert "-o HostKeyAlias=forge.example" in target.ssh_command()
    with pytest.raises(RepoRefused):
        check("ssh://git@loop.example/e", ssh=True)


def test_parse_allow_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="ARBITER_GIT_ALLOW"):
        parse_allow("10.0.0.0/33")
    with pytest.raises(ValueError, match="ARBITER_GIT_ALLOW"):
        parse_allow("bad host!")
    allowed = parse_allow(" Git.Corp. , ::1/128, FILE ,")
    assert allowed.hosts == frozenset({"git.corp"})
    assert allowed.files


def test_split_url() -> None:
    assert split_url("https://Forge.example/o/e") == ("https", "forge.example", 443)
    assert split_url("git@forge.example:o/e") == ("ssh", "forge.example", 22)
    assert split_url("http://[::1]:8080/e") == ("http", "::1", 8080)


@pytest.mark.parametrize(
    ("url", "github"),
    [
        ("https://github.com/official-stockfish/Stockfish", True),
        ("https://github.com/alice/Stockfish/", True),
        ("https://github.com/alice/my.engine_2-x", True),
        ("http://github.com/alice/Stockfish", False),
        ("https://gitlab.com/alice/Stockfish", False),
        ("https://github.com.evil.example/alice/Stockfish", False),
        ("https://github.com/alice", False),
        ("https://github.com/alice/Stockfish/tree/dev", False),
        ("file:///srv/git/engine", False),
        ("git@github.com:alice/Stockfish.git", False),
    ],
)
def test_only_github_repositories_are_the_official_workers(url: str, github: bool) -> None:
    assert is_github_repository(url) is github


def test_an_address_that_embeds_a_public_ipv4_is_public() -> None:
    assert check("https://public6to4.example/e") == ("2002:8c52:7003::1",)


@pytest.mark.parametrize(
    ("address", "inner"),
    [
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("2002:7f00:1::1", ["127.0.0.1"]),
        ("64:ff9b::a00:5", ["10.0.0.5"]),
        ("64:ff9b:1::c0a8:101", ["192.168.1.1"]),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", ["65.54.227.120", "10.0.0.1"]),
        ("2606:50c0:8000::153", []),
    ],
)
def test_embedded_ipv4_addresses_are_found(address: str, inner: list[str]) -> None:
    assert [str(ip) for ip in embedded_ipv4(ipaddress.ip_address(address))] == inner
