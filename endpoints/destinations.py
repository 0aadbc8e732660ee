"""Which URLs the relay may call (CONTRACT section 4).

Unless private destinations are allowed, a host that resolves to any
non-global address is refused, both when an endpoint is saved and again at
send time (the dispatcher's resolver, deliveries/dispatch/resolver.py,
connects only to the addresses check_host returned). No Django imports: this
module must load (and be tested) without settings.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from requests_hardened.ip_filter import EXTRA_BLOCKED_NET_RANGES
from yarl import URL

ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}
DNS_ERROR = "dns_error"

Resolver = Callable[[str, int], list[str]]


class DestinationRefused(ValueError):
    """Raised when a URL may not be called; .reason is a short human sentence, .code a slug."""

    def __init__(self, reason: str, code: str = "destination_blocked") -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


def resolve_host(host: str, port: int) -> list[str]:
    """Every address getaddrinfo gives for host, in its order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def is_public_address(ip: str) -> bool:
    """True only for globally routable unicast addresses."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    # ::ffff:127.0.0.1 reaches 127.0.0.1; judge the IPv4 address it carries.
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if isinstance(addr, ipaddress.IPv6Address) and addr.is_site_local:
        return False
    if (
        not addr.is_global
        or addr.is_multicast
        or addr.is_reserved
        or addr.is_unspecified
        or addr.is_loopback
        or addr.is_link_local
        or addr.is_private
    ):
        return False
    # Ranges that is_global misses on some CPython releases, or that route to
    # internal workloads (CGNAT, NAT64, 6to4); the session filter uses them too.
    return not any(addr in net for net in EXTRA_BLOCKED_NET_RANGES)


def check_url(
    url: str, *, allow_private: bool, resolve: Resolver | None = None
) -> list[str]:
    """Refuse url unless it is http(s), has a host and no credentials, and every
    address its host resolves to is public (or allow_private). Returns the addresses.
    """
    host, port = url_host_and_port(url)
    return check_host(host, port, allow_private=allow_private, resolve=resolve)


def check_host(
    host: str, port: int, *, allow_private: bool, resolve: Resolver | None = None
) -> list[str]:
    """Resolve host and refuse it unless every address is public (or allow_private).

    The one policy for save time (check_url) and send time (the dispatcher's
    resolver, which connects only to the addresses returned here).
    """
    try:
        addresses = (resolve or resolve_host)(host, port)
    except (OSError, UnicodeError) as exc:  # gaierror; IDNA rejects some labels
        raise DestinationRefused(
            f"could not resolve host {host!r}", code=DNS_ERROR
        ) from exc
    if not addresses:
        raise DestinationRefused(f"could not resolve host {host!r}", code=DNS_ERROR)
    if not allow_private:
        # Any one bad address is enough: a client may try them all in turn.
        # The address itself is never named: the reason reaches merchants, and
        # naming it would let them map internal DNS names.
        if not all(is_public_address(address) for address in addresses):
            raise DestinationRefused(
                f"host {host!r} resolves to a private or loopback address; "
                "only public addresses may be called"
            )
    return addresses


def url_host_and_port(url: str) -> tuple[str, int]:
    """The host and port the sender connects to for url; refuses malformed URLs.

    The host is yarl's (the sender's URL parser too): lower-cased and, for a Unicode
    name, mapped by UTS 46, so an IP literal that only appears after that
    mapping (U+1FBF1 is a "1") is judged as the address it becomes.
    """
    # urlsplit silently drops tabs and newlines that other parsers keep; refusing
    # them means the host checked here is the host the sender connects to.
    if any(ch <= " " or ch == "\x7f" for ch in url):
        raise DestinationRefused("the URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # bad brackets, non-numeric or out-of-range port
        raise DestinationRefused(f"the URL is not valid: {exc}") from exc
    if parts.scheme not in ALLOWED_SCHEMES:
        raise DestinationRefused("only http and https URLs may be called")
    # Any "@" is userinfo, even an empty one; it is also a classic way to make
    # two URL parsers disagree about the host.
    if "@" in parts.netloc:
        raise DestinationRefused("credentials in the URL are not allowed")
    if not parts.hostname:
        raise DestinationRefused("the URL has no host")
    if "%" in parts.hostname:
        # IPv6 zone ids and percent-encoded hosts decode differently per parser.
        raise DestinationRefused("the host may not contain '%'")
    if port == 0:
        raise DestinationRefused("port 0 is not valid")
    port = port or DEFAULT_PORTS[parts.scheme]
    try:
        parsed = URL(url)  # as the sender parses it, to connect
        host = parsed.raw_host
    except (ValueError, UnicodeError) as exc:  # backslashes, labels IDNA refuses
        raise DestinationRefused(f"the URL is not valid: {exc}") from exc
    if not host:
        raise DestinationRefused("the URL has no host")
    if "%" in host:
        raise DestinationRefused("the host may not contain '%'")
    if parts.hostname.isascii():
        # IPv6 literals are compared as addresses: yarl writes them compressed.
        if ":" not in host and parts.hostname != host:
            raise DestinationRefused("URL parsers disagree about this host")
    elif _idna2003(parts.hostname) != host:
        # Python's IDNA 2003 codec (getaddrinfo, requests) and UTS 46 (yarl)
        # must name the same host: one URL, one meaning, or none.
        raise DestinationRefused(
            "the host name means different hosts under IDNA 2003 and UTS 46; "
            "write it in its ASCII (xn--) form"
        )
    if parsed.port != port:
        raise DestinationRefused("the URL's port is ambiguous")
    return host, port


def _idna2003(hostname: str) -> str | None:
    try:
        return hostname.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
