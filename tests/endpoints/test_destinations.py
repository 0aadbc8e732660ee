from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from endpoints.destinations import (
    DestinationRefused,
    check_url,
    is_public_address,
)

PUBLIC_IP = "93.184.215.14"


def resolver(answers: dict[str, list[str]]):
    """A resolver that knows only these names, and records what it was asked."""
    calls: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return answers[host]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


def must_not_resolve(host: str, port: int) -> list[str]:
    raise AssertionError(f"resolver called for {host}:{port}")


# --- check_url: refused before DNS --------------------------------------------


MALFORMED = [
    ("file:///etc/passwd", "only http and https"),
    ("gopher://example.com/", "only http and https"),
    ("ftp://example.com/", "only http and https"),
    ("https://user:pw@example.com/", "credentials"),
    ("https://user@example.com/", "credentials"),
    ("http://@example.com/", "credentials"),
    ("http:///path", "no host"),
    ("http://:80/", "no host"),
    ("http://example.com:0/", "port 0"),
    ("http://example.com:99999/", "not valid"),
    ("http://example.com:http/", "not valid"),
    ("http://[::1/", "not valid"),
    ("http://exa\tmple.com/", "whitespace"),
    (" http://example.com/", "whitespace"),
    ("http://[fe80::1%25eth0]/", "'%'"),
]


@pytest.mark.parametrize(("url", "reason"), MALFORMED)
def test_malformed_url_is_refused_without_resolving(url: str, reason: str) -> None:
    with pytest.raises(DestinationRefused) as refused:
        check_url(url, allow_private=False, resolve=must_not_resolve)
    assert reason in refused.value.reason
    assert refused.value.code == "destination_blocked"


def test_allow_private_does_not_relax_the_scheme_rule() -> None:
    with pytest.raises(DestinationRefused, match="only http and https"):
        check_url("file:///etc/passwd", allow_private=True)


# --- check_url: refused for the address, with the real resolver ---------------


# Refused for the address, with the real resolver (no DNS: numeric or /etc/hosts).
NON_PUBLIC = [
    "http://127.0.0.1/",
    "http://localhost/",
    "http://LOCALHOST:8000/",
    "http://127.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0.0.0.0/",
    "http://0/",
    "http://[::1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://169.254.169.254/latest/meta-data",
    "http://[fd00:ec2::254]/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://[fc00::1]/",
    "http://[fe80::1]/",
    "https://[::ffff:169.254.169.254]/",
]


@pytest.mark.parametrize("url", NON_PUBLIC)
def test_non_public_destination_is_refused_with_the_real_resolver(url: str) -> None:
    with pytest.raises(DestinationRefused) as refused:
        check_url(url, allow_private=False)
    # Refused for where it points, not because resolution failed.
    assert refused.value.code == "destination_blocked"
    assert "private or loopback address" in refused.value.reason


def test_host_with_one_private_address_among_several_is_refused() -> None:
    resolve = resolver({"example.com": [PUBLIC_IP, "10.0.0.5"]})
    with pytest.raises(DestinationRefused, match="private or loopback"):
        check_url("https://example.com/", allow_private=False, resolve=resolve)


def test_a_refusal_names_the_kind_of_address_never_the_address() -> None:
    # A merchant reads this reason: naming the address would map internal DNS.
    resolve = resolver({"db.internal": ["10.20.30.40", "fd00::7"]})
    with pytest.raises(DestinationRefused) as refused:
        check_url("https://db.internal/", allow_private=False, resolve=resolve)
    assert "10.20.30.40" not in refused.value.reason
    assert "fd00" not in refused.value.reason
    assert "private or loopback address" in refused.value.reason


def test_host_that_does_not_resolve_is_refused_as_a_dns_error() -> None:
    def fail(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(DestinationRefused) as refused:
        check_url("https://nowhere.invalid/", allow_private=False, resolve=fail)
    assert refused.value.reason == "could not resolve host 'nowhere.invalid'"
    assert refused.value.code == "dns_error"


def test_host_with_no_addresses_is_refused_as_a_dns_error() -> None:
    with pytest.raises(DestinationRefused) as refused:
        check_url(
            "https://example.com/",
            allow_private=False,
            resolve=resolver({"example.com": []}),
        )
    assert refused.value.code == "dns_error"


# --- check_url: allowed -------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "asked"),
    [
        ("https://example.com/hook", ("example.com", 443)),
        ("http://example.com/hook", ("example.com", 80)),
        ("https://EXAMPLE.com:8443/hook?x=1", ("example.com", 8443)),
    ],
)
def test_public_host_is_allowed_and_resolved_by_lowercase_name_and_port(
    url: str, asked: tuple[str, int]
) -> None:
    resolve = resolver({"example.com": [PUBLIC_IP]})
    assert check_url(url, allow_private=False, resolve=resolve) == [PUBLIC_IP]
    assert resolve.calls == [asked]


PUBLIC_LITERALS = [
    ("http://8.8.8.8/", "8.8.8.8"),
    ("https://[2606:4700:4700::1111]/", "2606:4700:4700::1111"),
]


@pytest.mark.parametrize(("url", "address"), PUBLIC_LITERALS)
def test_public_ip_literal_is_allowed_with_the_real_resolver(
    url: str, address: str
) -> None:
    assert check_url(url, allow_private=False) == [address]


def test_allow_private_lets_loopback_through() -> None:
    assert check_url("http://127.0.0.1:8080/", allow_private=True) == ["127.0.0.1"]


def test_public_at_save_time_private_at_send_time_is_refused_at_send_time() -> None:
    answers = iter([[PUBLIC_IP], ["127.0.0.1"]])

    def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    url = "https://rebind.example/hook"
    assert check_url(url, allow_private=False, resolve=rebinding) == [PUBLIC_IP]
    with pytest.raises(DestinationRefused, match="private or loopback"):
        check_url(url, allow_private=False, resolve=rebinding)


# --- is_public_address --------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "public"),
    [
        ("8.8.8.8", True),
        (PUBLIC_IP, True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("0.0.0.0", False),
        ("::", False),
        ("169.254.169.254", False),
        ("fd00:ec2::254", False),
        ("100.64.0.1", False),
        ("224.0.0.1", False),  # multicast
        ("ff02::1", False),  # multicast
        ("240.0.0.1", False),  # reserved
        ("255.255.255.255", False),
        ("fec0::1", False),  # site-local: is_global is True on CPython 3.11
        ("::7f00:1", False),  # IPv4-compatible, deprecated
        ("192.88.99.1", False),  # requests-hardened extra: 6to4 relay
        ("64:ff9b::7f00:1", False),  # requests-hardened extra: NAT64
        ("2002:7f00:1::", False),  # requests-hardened extra: 6to4
        ("192.0.0.9", False),  # requests-hardened extra: IETF protocol block
        ("example.com", False),
        ("", False),
    ],
)
def test_is_public_address(ip: str, public: bool) -> None:
    assert is_public_address(ip) is public


def test_module_imports_without_django() -> None:
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys, endpoints.destinations; "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'django']"
    )
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)
