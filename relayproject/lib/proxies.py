"""The client's address and scheme, believing forwarded headers only from TRUSTED_PROXIES.

Anyone can send X-Forwarded-For and X-Forwarded-Proto; only a proxy we put
in front of the app may be believed. From a peer listed in TRUSTED_PROXIES,
the client is the right-most X-Forwarded-For address that is not itself a
trusted proxy (left of it, the client could have written anything), and
X-Forwarded-Proto: https makes the request secure. The middleware rewrites
REMOTE_ADDR so everything after it (the sign-in throttle, logs) sees the
client; the peer's own address stays in RELAY_PEER_ADDR.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(trusted: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in trusted)


def _is_trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in networks)


def is_trusted_proxy(address: str) -> bool:
    """True when address is one of TRUSTED_PROXIES."""
    return _is_trusted(address, _networks(tuple(settings.TRUSTED_PROXIES)))


def forwarded_client(
    *, peer: str, forwarded_for: str, networks: tuple[Network, ...]
) -> str:
    """The client address for a request that came from peer with this X-Forwarded-For."""
    if not _is_trusted(peer, networks):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return peer  # garbage where an address should be: trust nothing
        if not _is_trusted(hop, networks):
            return hop
    return hops[0] if hops else peer


class TrustedProxyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        peer = meta.get("REMOTE_ADDR", "")
        meta["RELAY_PEER_ADDR"] = peer
        networks = _networks(tuple(settings.TRUSTED_PROXIES))
        if networks and _is_trusted(peer, networks):
            meta["REMOTE_ADDR"] = forwarded_client(
                peer=peer,
                forwarded_for=meta.get("HTTP_X_FORWARDED_FOR", ""),
                networks=networks,
            )
            # The last proxy's word: the one that spoke to the client.
            proto = meta.get("HTTP_X_FORWARDED_PROTO", "").split(",")[-1].strip()
            if proto.lower() == "https":
                meta["wsgi.url_scheme"] = "https"
        return self.get_response(request)


def client_ip(request: HttpRequest) -> str:
    """The client address after TrustedProxyMiddleware (django-axes asks this)."""
    return request.META.get("REMOTE_ADDR", "")


def forwarded_allow_list(trusted: list[str]) -> str:
    """TRUSTED_PROXIES as gunicorn's forwarded_allow_ips (gunicorn.conf.py).

    gunicorn wants networks without host bits (10.0.0.0/8, not 10.0.0.1/8),
    which the middleware accepts, so each entry is normalised the same way;
    an entry that is no address at all stops gunicorn at start.
    """
    return ",".join(str(network) for network in _networks(tuple(trusted)))
