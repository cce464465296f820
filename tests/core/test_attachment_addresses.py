"""Which addresses a peer's remote attachment may reach: every IPv6 form that carries
an IPv4 address is judged by the IPv4 address it carries (pure logic, no network)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cone.engine._download import check_url, public
from cone.engine.roles.attachments import DownloadError

# IPv4 addresses cone must never fetch from for a peer.
NOT_PUBLIC_V4 = ["127.0.0.1", "169.254.169.254", "10.0.0.1", "192.168.1.1", "0.0.0.0", "100.64.0.1"]


def _embeddings(v4: str) -> list[str]:
    """The IPv6 forms that embed `v4`."""
    n = int(ipaddress.IPv4Address(v4))
    hi, lo = n >> 16, n & 0xFFFF
    return [
        f"::ffff:{v4}",  # IPv4-mapped
        f"::{hi:x}:{lo:x}",  # IPv4-compatible (deprecated)
        f"64:ff9b::{hi:x}:{lo:x}",  # NAT64 well-known prefix
        f"64:ff9b:1::{hi:x}:{lo:x}",  # NAT64 local-use prefix
        f"2002:{hi:x}:{lo:x}::1",  # 6to4
        # Teredo: the client's address is stored inverted, the server's plainly.
        f"2001:0:{hi:x}:{lo:x}::1",
        f"2001:0:808:808:0:0:{hi ^ 0xFFFF:x}:{lo ^ 0xFFFF:x}",
    ]


@pytest.mark.parametrize("v4", NOT_PUBLIC_V4)
def test_every_ipv6_form_of_a_private_ipv4_address_is_refused(v4: str) -> None:
    for v6 in _embeddings(v4):
        assert not public(ipaddress.ip_address(v6)), v6
        with pytest.raises(DownloadError, match="non-public"):
            check_url(f"https://[{v6}]/file", local=False)


def test_the_reported_addresses_are_refused() -> None:
    for v6 in ("64:ff9b::a9fe:a9fe", "::7f00:1", "2002:a9fe:a9fe::"):
        with pytest.raises(DownloadError, match="non-public"):
            check_url(f"https://[{v6}]/", local=False)


def test_public_ipv4_in_ipv6_forms_stays_public() -> None:
    for v6 in ("64:ff9b::808:808", "2002:808:808::1", "2606:4700::1111"):
        assert public(ipaddress.ip_address(v6)), v6


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_an_embedded_address_is_never_more_public_than_itself(n: int) -> None:
    v4 = ipaddress.IPv4Address(n)
    for v6 in _embeddings(str(v4))[:5]:
        if not v4.is_global:
            assert not public(ipaddress.ip_address(v6)), v6
