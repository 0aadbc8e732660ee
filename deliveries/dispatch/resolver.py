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
import threading
from collections.abc import Hashable

from endpoints import destinations

DNS_TTL_SECONDS = 10  # an allowed name's addresses are reused this long
DNS_CACHE_SIZE = 4096
# A send waits this long for its name's addresses, at most; the sender lowers
# it to half its own timeout, so a lookup that does not answer ends as the
# merchant's dns_error, never as a timeout of the send.
DNS_TIMEOUT_SECONDS = 5.0
# getaddrinfo blocks, and glibc gives up on a silent server only after its own
# timeouts (tens of seconds): each lookup runs on a thread of its own. A
# merchant (a tenant) has at most DNS_LOOKUPS_PER_TENANT of them at once, held
# until getaddrinfo returns, so a merchant whose DNS stalls stalls only its own
# sends; DNS_LOOKUPS bounds them all (64 stalled merchants to fill it).
DNS_LOOKUPS_PER_TENANT = 4
DNS_LOOKUPS = 256
# Where a lookup is: waiting for its tenant's slot, for one of all, or asked.
_TENANT, _ALL, _ASKED = "tenant", "all", "asked"


class CheckedAddresses:
    """The addresses the sender may dial for (host, port): a literal as it is,
    a name resolved and judged by the policy, every address or none.

    Only verdicts that allow are kept, for DNS_TTL_SECONDS; a refusal
    (destinations.DestinationRefused) is raised, and judged afresh next time.
    Sends of one merchant that ask for the same name at once share one
    lookup: a merchant whose DNS answers slowly holds one thread, not one per
    send; another merchant's sends to that name look it up on their own. A lookup
    that has not answered within `lookup_timeout` is a DNS error of the name
    asked for; its thread is a daemon, so it never holds up a stopping process.
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolve: destinations.Resolver | None = None,
        lookup_timeout: float = DNS_TIMEOUT_SECONDS,
        per_tenant: int = DNS_LOOKUPS_PER_TENANT,
        lookups: int = DNS_LOOKUPS,
    ) -> None:
        self.allow_private = allow_private
        self.resolve_sync = resolve or destinations.resolve_host
        self.lookup_timeout = lookup_timeout
        self.per_tenant = per_tenant
        self._allowed: dict[tuple[str, int], tuple[float, list[str]]] = {}
        # Lookups in flight, by (host, port, tenant): sends of one merchant
        # share one, never another merchant's, which may wait behind that
        # merchant's stalled lookups for a slot.
        self._looking: dict[tuple[str, int, Hashable], asyncio.Future] = {}
        self._lookups = lookups
        self._all: asyncio.Semaphore | None = None
        # tenant -> [its slots, the lookups holding or waiting for one]
        self._tenants: dict[Hashable, list] = {}
        self._starting: set[asyncio.Task] = set()  # the loop keeps weak references
        self._stage: dict[tuple[str, int, Hashable], str] = {}  # not asked yet

    async def __call__(
        self, host: str, port: int, tenant: Hashable = None
    ) -> list[str]:
        if _is_address(host):
            return [host]  # judged by check_literal before the send began
        loop = asyncio.get_running_loop()
        now = loop.time()
        kept = self._allowed.get((host, port))
        if kept is not None and kept[0] > now:
            return kept[1]
        key = (host, port, tenant)
        lookup = self._looking.get(key)
        if lookup is None:
            lookup = loop.create_future()
            self._looking[key] = lookup
            lookup.add_done_callback(functools.partial(self._settle, key, now))
            task = loop.create_task(self._look_up(host, port, tenant, lookup))
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)
        try:
            async with asyncio.timeout(self.lookup_timeout):
                # One caller's deadline must not cancel the lookup others wait on.
                return await asyncio.shield(lookup)
        except TimeoutError:
            raise self._unanswered(key) from None

    def _unanswered(
        self, key: tuple[str, int, Hashable]
    ) -> destinations.DestinationRefused:
        """The DNS error of a send whose lookup did not end in time, saying
        truly where it was: asked and silent, or still waiting for a slot."""
        stage = self._stage.get(key, _ASKED)
        why = {
            _ASKED: f"no answer from DNS within {self.lookup_timeout:g} s",
            _TENANT: f"not looked up within {self.lookup_timeout:g} s: earlier "
            "DNS lookups of this merchant's hosts have not answered yet",
            _ALL: f"not looked up within {self.lookup_timeout:g} s: every DNS "
            "lookup of this dispatcher is waiting for an answer",
        }[stage]
        return destinations.DestinationRefused(
            f"could not resolve host {key[0]!r}: {why}", code=destinations.DNS_ERROR
        )

    async def _look_up(
        self, host: str, port: int, tenant: Hashable, lookup: asyncio.Future
    ) -> None:
        """Wait for a slot of tenant's and one of all, then look host up on a
        thread of its own; both slots are given back when getaddrinfo returns."""
        if self._all is None:
            self._all = asyncio.Semaphore(self._lookups)
        held = self._tenants.setdefault(tenant, [asyncio.Semaphore(self.per_tenant), 0])
        held[1] += 1
        key = (host, port, tenant)
        taken: list[asyncio.Semaphore] = []
        try:
            # Nobody waits longer than the deadline: a slot taken later would
            # only start a lookup that no send is waiting for any more.
            async with asyncio.timeout(self.lookup_timeout):
                for stage, slot in ((_TENANT, held[0]), (_ALL, self._all)):
                    self._stage[key] = stage
                    await slot.acquire()
                    taken.append(slot)
        except TimeoutError:
            self._release(tenant, taken)
            if not lookup.done():
                lookup.set_exception(self._unanswered(key))
            return
        finally:
            del self._stage[key]
        loop = asyncio.get_running_loop()
        done = functools.partial(self._done, tenant, taken, lookup)
        threading.Thread(
            target=self._check,
            args=(host, port, loop, done),
            daemon=True,
            name="relay-dns",
        ).start()

    def _check(self, host: str, port: int, loop, done) -> None:
        """On the lookup's own thread: the policy's verdict, handed to the loop."""
        try:
            outcome = destinations.check_host(
                host, port, allow_private=self.allow_private, resolve=self.resolve_sync
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting send
            outcome = exc
        try:
            loop.call_soon_threadsafe(done, outcome)
        except RuntimeError:
            pass  # the loop is closed: the dispatcher has stopped

    def _done(self, tenant, taken, lookup: asyncio.Future, outcome) -> None:
        self._release(tenant, taken)
        if lookup.done():
            return
        if isinstance(outcome, BaseException):
            lookup.set_exception(outcome)
        else:
            lookup.set_result(outcome)

    def _release(self, tenant: Hashable, taken: list[asyncio.Semaphore]) -> None:
        for slot in taken:
            slot.release()
        held = self._tenants[tenant]
        held[1] -= 1
        if not held[1]:
            del self._tenants[tenant]

    def _settle(
        self, key: tuple[str, int, Hashable], asked: float, lookup: asyncio.Future
    ):
        del self._looking[key]
        if lookup.cancelled() or lookup.exception() is not None:
            return  # a refusal is judged afresh at the next send
        if len(self._allowed) >= DNS_CACHE_SIZE:
            self._allowed.clear()
        # An answer is the name's, whoever asked: every merchant may use it.
        self._allowed[key[:2]] = (asked + DNS_TTL_SECONDS, lookup.result())

    def close(self) -> None:
        """Nothing to wait for: a lookup still running ends with its thread."""


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
