"""The destination policy on the async send path (CONTRACT section 4).

The sender connects only to addresses CheckedAddresses hands it, and those
come from the same check as save time (endpoints.destinations.check_host,
one source of truth). TLS still verifies the certificate against the URL's
host name, and SNI carries it: the name is dialled by address, not replaced.

An IP-literal URL is never resolved; check_literal judges it, and every
numeric form a socket would map onto an address (127.1, 2130706433,
0x7f000001), before a request starts.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor

from endpoints import destinations

DNS_TTL_SECONDS = 10  # an allowed name's addresses are reused this long
DNS_CACHE_SIZE = 4096
# Threads for getaddrinfo, which blocks: a sender's own, so that lookups never
# queue behind other work on the loop's default executor.
DNS_THREADS = 32


class CheckedAddresses:
    """The addresses the sender may dial for (host, port): a literal as it is,
    a name resolved and judged by the policy, every address or none.

    Only verdicts that allow are kept, for DNS_TTL_SECONDS; a refusal
    (destinations.DestinationRefused) is raised, and judged afresh next time.
    Sends that ask for the same name at once share one lookup: a merchant
    whose DNS answers slowly holds one thread, not one per send.
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolve: destinations.Resolver | None = None,
    ) -> None:
        self.allow_private = allow_private
        # getaddrinfo blocks: it runs on the loop's default executor.
        self.resolve_sync = resolve or destinations.resolve_host
        self._allowed: dict[tuple[str, int], tuple[float, list[str]]] = {}
        self._looking: dict[tuple[str, int], asyncio.Future] = {}
        self._threads: ThreadPoolExecutor | None = None

    async def __call__(self, host: str, port: int) -> list[str]:
        if _is_address(host):
            return [host]  # judged by check_literal before the send began
        loop = asyncio.get_running_loop()
        now = loop.time()
        key = (host, port)
        kept = self._allowed.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        lookup = self._looking.get(key)
        if lookup is None:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(DNS_THREADS, "relay-dns")
            lookup = loop.run_in_executor(self._threads, self._check, host, port)
            self._looking[key] = lookup
            lookup.add_done_callback(functools.partial(self._settle, key, now))
        # One caller's deadline must not cancel the lookup the others wait on.
        return await asyncio.shield(lookup)

    def _settle(self, key: tuple[str, int], asked: float, lookup: asyncio.Future):
        del self._looking[key]
        if lookup.cancelled() or lookup.exception() is not None:
            return  # a refusal is judged afresh at the next send
        if len(self._allowed) >= DNS_CACHE_SIZE:
            self._allowed.clear()
        self._allowed[key] = (asked + DNS_TTL_SECONDS, lookup.result())

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def _check(self, host: str, port: int) -> list[str]:
        return destinations.check_host(
            host, port, allow_private=self.allow_private, resolve=self.resolve_sync
        )


@functools.lru_cache(maxsize=4096)
def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


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
