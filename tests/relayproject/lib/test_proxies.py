"""Which address is the client's: the right-most untrusted X-Forwarded-For hop."""

from __future__ import annotations

import ipaddress

import pytest

from relayproject.lib.proxies import forwarded_client

NETS = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128"))


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "client"),
    [
        ("203.0.113.1", "198.51.100.7", "203.0.113.1"),  # untrusted peer: ignored
        ("10.0.0.2", "198.51.100.7", "198.51.100.7"),
        ("10.0.0.2", "1.2.3.4, 198.51.100.7", "198.51.100.7"),  # forged left hop
        ("10.0.0.2", "198.51.100.7, 10.0.0.9", "198.51.100.7"),  # two proxies
        ("10.0.0.2", "", "10.0.0.2"),
        ("10.0.0.2", "not-an-ip", "10.0.0.2"),
        ("::1", "2001:db8::5", "2001:db8::5"),
    ],
)
def test_forwarded_client(peer, forwarded_for, client):
    assert (
        forwarded_client(peer=peer, forwarded_for=forwarded_for, networks=NETS)
        == client
    )
