"""The destination policy on the async send path (CONTRACT section 4).

aiohttp asks a resolver for a host's addresses and connects only to what it
returns, so PolicyResolver is the seam: it resolves with the same check as
save time (endpoints.destinations.check_host, one source of truth) and hands
back only addresses that passed. TLS keeps verifying the certificate against
the URL's host name, and SNI carries it, because aiohttp still knows the name.

aiohttp never asks a resolver about an IP-literal URL; check_literal covers
those, and every numeric form a socket would map onto an address (127.1,
2130706433, 0x7f000001), before a request starts.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult

from endpoints import destinations


class RefusedByPolicy(OSError):
    """The policy refused a host. An OSError, so that aiohttp reports it as a
    resolution failure and keeps it as the cause (see refusal_in)."""

    def __init__(self, refused: destinations.DestinationRefused) -> None:
        super().__init__(refused.reason)
        self.refused = refused


class PolicyResolver(AbstractResolver):
    """Resolves a host and returns its addresses only if every one is allowed."""

    def __init__(
        self,
        *,
        allow_private: bool,
        resolve: destinations.Resolver | None = None,
    ) -> None:
        self.allow_private = allow_private
        # getaddrinfo blocks: it runs on the loop's default executor.
        self.resolve_sync = resolve or destinations.resolve_host

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        loop = asyncio.get_running_loop()
        try:
            addresses = await loop.run_in_executor(None, self._check, host, port)
        except destinations.DestinationRefused as refused:
            raise RefusedByPolicy(refused) from refused
        return [_result(host, address, port) for address in addresses]

    def _check(self, host: str, port: int) -> list[str]:
        return destinations.check_host(
            host, port, allow_private=self.allow_private, resolve=self.resolve_sync
        )

    async def close(self) -> None:
        pass


def check_literal(url: str, *, allow_private: bool) -> None:
    """Refuse url if it is malformed, or if its host is an address (in any
    numeric form) that the policy refuses. Host names are left to the resolver.
    """
    _check_literal_url(url, allow_private)


@functools.lru_cache(maxsize=4096)
def _check_literal_url(url: str, allow_private: bool) -> None:
    # Runs before every send, and an endpoint sends to one URL again and
    # again: its verdict is a pure function of the string (the parse, the
    # numeric forms, the literal's check below), so a pass is remembered and
    # a refusal (it raises) is judged afresh each time. Host names are not
    # judged here, so nothing that DNS could change is kept.
    host, port = destinations.url_host_and_port(url)
    if _literal_address(host) is not None:
        _check_literal_host(host, port, allow_private)


@functools.lru_cache(maxsize=4096)
def _check_literal_host(host: str, port: int, allow_private: bool) -> None:
    """check_host for an address literal; the verdict of a literal never changes,
    so an allowed one is remembered (a refusal raises, and is not): this runs
    before every send, on the event loop, and getaddrinfo is a blocking call."""
    # getaddrinfo maps numeric forms locally, without asking DNS.
    destinations.check_host(host, port, allow_private=allow_private)


def refusal_in(exc: BaseException) -> destinations.DestinationRefused | None:
    """The policy's refusal somewhere in exc's chain of causes, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RefusedByPolicy):
            return current.refused
        if isinstance(current, destinations.DestinationRefused):
            return current
        current = current.__cause__ or current.__context__
    return None


def _literal_address(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        pass
    try:
        # The legacy forms inet_aton accepts: 127.1, 2130706433, 0x7f.1, 017700000001.
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def _result(host: str, address: str, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return ResolveResult(
        hostname=host,
        host=address,
        port=port,
        family=family,
        proto=0,
        flags=socket.AI_NUMERICHOST,
    )
