"""Which repository URLs git may be pointed at: the server's and the worker's one rule.

A run names a repository URL that the server reads and every worker fetches,
so a URL is a way to make those machines connect somewhere. The policy admits
https (and ssh when the operator enables it) to public addresses only. Loopback,
link-local, private and other non-public ranges (an IPv6 address that carries
an IPv4 one, IPv4-mapped, 6to4, Teredo or NAT64, is judged by what it
carries), plain http, git:// and file:// are refused unless the allow list
(`ARBITER_GIT_ALLOW` on the server, `ARBITER_WORKER_GIT_ALLOW` on a worker)
names the host, a CIDR range holding
every address it resolves to, or `file`.

Every address a name resolves to is checked, and git is then pinned to
exactly those addresses (`http.curloptResolve`, ssh's `HostName`) with http
redirects off, so neither a second DNS answer nor a redirect can lead it
elsewhere. Refusals say what was refused, never whether anything listens there.

Imports nothing of ours: the worker applies it too. `check` resolves names
(blocking DNS): call it where blocking is allowed.
"""

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22, "git": 9418}
_SCP_LIKE = re.compile(
    r"(?P<user>[A-Za-z0-9_][A-Za-z0-9._-]*)@(?P<host>[A-Za-z0-9.-]+):(?P<path>.+)"
)
_HOST_NAME = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?"
)


class RepoRefused(ValueError):  # noqa: N818
    """The URL is against the policy; the message says why, in words a submitter can act on."""


@dataclass(frozen=True, slots=True)
class AllowList:
    """What the operator lets through besides public https: host names, CIDR ranges, `file`."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()
    files: bool = False

    def admits_host(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def admits_address(self, address: Address) -> bool:
        return any(address in network for network in self.networks)


def parse_allow(text: str, setting: str = "ARBITER_GIT_ALLOW") -> AllowList:
    """`host.example, 10.0.0.0/8, ::1/128, file` -> AllowList; ValueError naming a bad entry."""
    hosts: set[str] = set()
    networks: list[Network] = []
    files = False
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        if entry.lower() == "file":
            files = True
        elif "/" in entry or _is_address(entry):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"{setting}: {entry!r} is not an address range") from None
        elif _HOST_NAME.fullmatch(entry):
            hosts.add(entry.lower().rstrip("."))
        else:
            raise ValueError(f"{setting}: {entry!r} is neither a host name, a range nor 'file'")
    return AllowList(frozenset(hosts), tuple(networks), files)


@dataclass(frozen=True, slots=True)
class Target:
    """A URL the policy admitted, with the addresses git is pinned to."""

    url: str
    scheme: str  # https, http, ssh, git or file
    host: str  # "" for file
    port: int
    addresses: tuple[str, ...] = ()

    def git_config(self) -> list[str]:
        """`git -c` arguments that keep git on the checked addresses."""
        options = ["-c", "http.followRedirects=false", "-c", "protocol.allow=never"]
        options += ["-c", f"protocol.{self.scheme}.allow=always"]
        if self.scheme in ("https", "http") and self.addresses:
            pinned = ",".join(_bracketed(address) for address in self.addresses)
            options += ["-c", f"http.curloptResolve={self.host}:{self.port}:{pinned}"]
        return options

    def ssh_command(self) -> str:
        """GIT_SSH_COMMAND: no prompts, and the first checked address, not a new lookup."""
        command = "ssh -o BatchMode=yes -o ConnectTimeout=10"
        if self.scheme == "ssh" and self.addresses:
            command += f" -o HostName={self.addresses[0]} -o HostKeyAlias={self.host}"
        return command


@dataclass(frozen=True, slots=True)
class RepoPolicy:
    allow: AllowList = field(default_factory=AllowList)
    ssh: bool = False  # ssh URLs (the operator's choice: keys on the machine)
    # The setting that holds `allow`, which a refusal names so it can be acted on.
    allow_setting: str = "ARBITER_GIT_ALLOW"

    def check(self, url: str, resolve: Resolver | None = None) -> Target:
        """The Target for `url`, or RepoRefused. Resolves the host name (blocking)."""
        scheme, host, port = split_url(url)
        if scheme == "file":
            if not self.allow.files:
                raise RepoRefused(
                    "file:// repositories are not allowed here"
                    f" ({self.allow_setting}=file allows them)"
                )
            return Target(url, scheme, "", 0)
        if scheme == "ssh" and not self.ssh:
            raise RepoRefused("ssh repositories are not enabled on this server: use https")
        named = self.allow.admits_host(host)
        # git:// cannot be pinned to the checked addresses: only for named hosts.
        if (scheme == "git" and not named) or (scheme == "http" and not self._may_http(named)):
            raise RepoRefused(f"{scheme}:// is not allowed: use https")
        addresses = [host] if _is_address(host) else (resolve or system_resolver)(host, port)
        if not addresses:
            raise RepoRefused(f"the host {host} has no address")
        checked = tuple(dict.fromkeys(addresses))
        for text in checked:
            self._check_address(host, scheme, named, ipaddress.ip_address(text.split("%")[0]))
        return Target(url, scheme, host.lower(), port, checked)

    def _may_http(self, named: bool) -> bool:
        return named or bool(self.allow.networks)

    def _check_address(self, host: str, scheme: str, named: bool, address: Address) -> None:
        allowed = named or self.allow.admits_address(address)
        if scheme in ("http", "git") and not allowed:
            raise RepoRefused(f"{scheme}:// is not allowed: use https")
        if not allowed and not is_public(address):
            raise RepoRefused(
                f"the host {host} resolves to a non-public address ({_kind(address)}),"
                " which this server does not connect to"
            )


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a git URL; scp-like `user@host:path` is ssh."""
    if "://" not in url:
        match = _SCP_LIKE.fullmatch(url)
        if match is None:
            raise RepoRefused("is not a git URL")
        return "ssh", _host(match.group("host")), DEFAULT_PORTS["ssh"]
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        raise RepoRefused("is not a git URL") from None
    if scheme == "file":
        return scheme, "", 0
    if scheme not in DEFAULT_PORTS:
        raise RepoRefused(f"{scheme}:// repositories are not supported")
    return scheme, _host(host), port or DEFAULT_PORTS[scheme]


# NAT64 prefixes (RFC 6052, RFC 8215): the last 32 bits are the IPv4 reached.
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def embedded_ipv4(address: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address leads to, which is what it must be
    judged by: IPv4-mapped, 6to4, Teredo (its server and its client) and
    NAT64 addresses; none for any other address."""
    if not isinstance(address, ipaddress.IPv6Address):
        return ()
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    if any(address in network for network in _NAT64):
        return (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF),)
    return ()


def is_public(address: Address) -> bool:
    """A globally routable unicast address; one that embeds IPv4 addresses
    (`embedded_ipv4`) only when every one of them is."""
    embedded = embedded_ipv4(address)
    if embedded:
        return all(_public_unicast(inner) for inner in embedded)
    return _public_unicast(address)


def _public_unicast(address: Address) -> bool:
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return False
    return address.is_global


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (literal addresses are their own answer)."""
    if _is_address(host):
        return [host]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise RepoRefused(f"the host {host} could not be resolved") from None
    return [str(info[4][0]) for info in infos]


def _host(host: str) -> str:
    host = host.strip("[]")
    if not host or host.startswith("-") or not (_is_address(host) or _HOST_NAME.fullmatch(host)):
        raise RepoRefused("needs a valid host name")
    return host


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", maxsplit=1)[0])
    except ValueError:
        return False
    return True


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _kind(address: Address) -> str:
    embedded = [inner for inner in embedded_ipv4(address) if not _public_unicast(inner)]
    if embedded:
        address = embedded[0]
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_private:
        return "private"
    return "reserved"


# The official worker downloads engines only as GitHub zipballs, from an
# address it makes by putting api.github.com/repos in place of github.com.
_GITHUB_REPOSITORY = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/?")


def is_github_repository(url: str) -> bool:
    """Whether the official worker can download this repository's commits."""
    return _GITHUB_REPOSITORY.fullmatch(url) is not None
