"""Where webhooks may go: address classes decided on plain values, never by
connecting anywhere."""

import pytest

from arbiter.domain.errors import ValidationError
from arbiter.domain.url_policy import Destination, address_allowed, check_url, destination


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "fc00::5",
        "::ffff:10.0.0.1",
        "100.64.0.1",
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    ],
)
def test_private_loopback_and_link_local_addresses_are_refused(address: str) -> None:
    assert not address_allowed(address, allow_private=False)


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "::1", "169.254.169.254"])
def test_the_operator_may_allow_private_addresses(address: str) -> None:
    assert address_allowed(address, allow_private=True)


UNUSABLE = ["0.0.0.0", "224.0.0.1", "240.0.0.1", "::", "not an ip"]  # noqa: S104 - values


@pytest.mark.parametrize("address", UNUSABLE)
def test_unusable_addresses_are_refused_even_when_private_ones_are_allowed(address: str) -> None:
    assert not address_allowed(address, allow_private=True)


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "2002:5db8:d70e::1"]
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_allowed(address, allow_private=False)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.org/x", "https://", "https://user:pw@example.org/", "x" * 501, "http://[::1"],
)
def test_bad_urls_are_refused_with_a_message_for_the_field(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        check_url(url)
    assert caught.value.field == "url"


def test_a_name_that_resolves_to_loopback_is_refused() -> None:
    """`localhost` resolves (from /etc/hosts) to loopback: refused unless allowed."""
    refused = destination("http://localhost:9/x", allow_private=False)
    assert isinstance(refused, str)
    assert "may not reach" in refused
    allowed = destination("http://localhost:9/x?a=1", allow_private=True)
    assert isinstance(allowed, Destination)
    assert allowed.address in ("127.0.0.1", "::1")
    assert (allowed.host_header, allowed.target) == ("localhost:9", "/x?a=1")
