"""Where webhooks may be sent: public addresses only, unless the operator allows
private ones (`ARBITER_WEBHOOK_ALLOW_PRIVATE`, e.g. a receiver on the same host).

A hook's host is resolved before every delivery and every address it resolves
to must be allowed, so a name cannot point a delivery at the server's own
network; the delivery then connects to one of exactly those addresses
(`Destination`), never resolving the name again, so a second DNS answer (a
rebinding) cannot lead it elsewhere. Pure functions of plain values, plus
`resolve` (a DNS lookup)."""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from arbiter.domain.errors import ValidationError
from arbiter.protocol.repo_policy import embedded_ipv4, is_public

MAX_URL_CHARS = 500


def address_allowed(address: str, *, allow_private: bool) -> bool:
    """Whether a delivery may connect to `address` (an IP address as text): a
    public one (the repository policy's test), or with `allow_private` a
    loopback, private or link-local one."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if is_public(ip):
        return True
    reached = embedded_ipv4(ip) or (ip,)
    return allow_private and all(_local(inner) for inner in reached)


def _local(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if ip.is_multicast or ip.is_unspecified:
        return False
    return ip.is_loopback or (not ip.is_reserved and (ip.is_private or ip.is_link_local))


def check_url(url: str) -> tuple[str, int]:
    """(host, port) of a hook URL, or ValidationError("url", ...)."""
    if len(url) > MAX_URL_CHARS:
        raise ValidationError("url", f"A webhook URL has at most {MAX_URL_CHARS} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValidationError("url", "This is not a URL.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("url", "A webhook URL starts with https:// (or http://).")
    if parts.username or parts.password:
        raise ValidationError("url", "Put no user name or password in a webhook URL.")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (blocking: the jobs executor)."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return sorted({str(info[4][0]) for info in infos})


@dataclass(frozen=True, slots=True)
class Destination:
    """A hook URL with the address its delivery connects to, checked."""

    url: str
    scheme: str
    host: str  # as the URL names it: the Host header, and TLS's server name
    port: int
    address: str  # what the connection goes to: one the host resolved to

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"

    @property
    def target(self) -> str:
        """The request target: the URL's path and query."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def destination(url: str, *, allow_private: bool) -> Destination | str:
    """Where a delivery to `url` may connect now, or why it may not."""
    host, port = check_url(url)
    try:
        addresses = resolve(host, port)
    except OSError as error:
        return f"cannot resolve {host}: {error}"
    barred = [a for a in addresses if not address_allowed(a, allow_private=allow_private)]
    if barred or not addresses:
        return f"{host} resolves to an address webhooks may not reach ({', '.join(barred)})"
    scheme = urlsplit(url).scheme
    return Destination(url, scheme, host, port, addresses[0])
