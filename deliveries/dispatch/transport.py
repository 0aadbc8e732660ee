"""One HTTP POST to a receiver -> SendResult. Writes nothing anywhere.

Persisting what happened is outcomes.py's job; keeping the two apart lets
tests drive the dispatcher with a scripted sender and lets this module be
tested against real loopback servers alone.

Receivers are hostile (a merchant controls its own): every attempt ends
within ``timeout`` seconds of its start whatever the receiver does, at most
``body_limit`` bytes of the body are read and they are never decompressed,
header sizes are bounded by the parser, and every failure becomes a
SendResult with an error kind (deliveries.models.ErrorKind), never an exception.
"""

from __future__ import annotations

import asyncio
import functools
import resource
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from yarl import URL

from deliveries.dispatch import client_tls, http1, pool, tunnel
from deliveries.dispatch.credentials import ClientTls, EndpointAuth
from deliveries.dispatch.resolver import (
    DNS_TIMEOUT_SECONDS,
    CheckedAddresses,
    check_literal,
)
from deliveries.models import ErrorKind
from deliveries.request import TRANSPORT_HEADERS
from endpoints import destinations

CONNECTION_LIMIT = 512  # sockets open at once per sender; sends past it wait
KEEPALIVE_SECONDS = 30  # an idle connection to a receiver is kept this long
# Response headers kept for people on the attempt (outcomes sanitises them):
# the first KEPT_HEADERS, each value cut to KEPT_HEADER_CHARS.
KEPT_HEADERS = 40
KEPT_HEADER_CHARS = 300
# Open files a sender needs per send slot: its socket, and as many again for
# idle keep-alive connections (the pool keeps at most its limit idle),
# plus a few for the database, logs and the loop itself.
FILES_PER_SLOT = 2
FILES_SPARE = 64


@dataclass(frozen=True)
class OutgoingRequest:
    url: str
    headers: dict[str, str]
    body: bytes
    # Whose send this is (the merchant's id): its DNS lookups are bounded per
    # tenant, so one merchant's stalled DNS cannot delay another's sends.
    tenant: int | None = None
    # A broker endpoint's (endpoints/brokers.py): the kind, its target, the
    # broker URL's user:password (url keeps the rest; never recorded or
    # logged) and the broker hosts the send may reach (RELAY_BROKER_HOSTS or
    # the merchant's own list). An http request uses none of them.
    kind: str = "http"
    target: Mapping[str, object] = field(default_factory=dict)
    credentials: str = field(default="", repr=False)
    broker_hosts: tuple[str, ...] = ()
    # The endpoint's own per-attempt timeout (its retry policy, bounded by
    # HTTP_TIMEOUT_MAX_SECONDS); None: the sender's.
    timeout: float | None = None
    # An http endpoint's client certificate and CA bundle, and its auth
    # (deliveries/dispatch/credentials.py); None: the defaults, no auth.
    client_tls: ClientTls | None = field(default=None, repr=False)
    auth: EndpointAuth | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SendResult:
    status_code: int | None
    duration_ms: float
    error_kind: str = ""
    error_message: str = ""
    body_excerpt: str = ""
    retry_after: str | None = None
    response_headers: tuple[tuple[str, str], ...] = ()
    # What was sent, as recorded (sendloop.recorded_request): secrets redacted.
    request_url: str = ""
    request_headers: tuple[tuple[str, str], ...] = ()
    # A broker took the message (a publisher confirm, a JetStream PubAck,
    # XADD's id, a PUBACK): delivered, with no HTTP status. body_excerpt says
    # what the broker answered.
    acknowledged: bool = False


class Sender(Protocol):
    """What the send loop sends with: AsyncSender, or a test's blocking double
    (tests/fakes.py), which the loop runs on threads of its own."""

    def send(self, request: OutgoingRequest) -> Awaitable[SendResult] | SendResult: ...


def wire_headers(request: OutgoingRequest) -> dict[str, str]:
    """The headers send() puts on the wire for request, in that order."""
    return {**request.headers, **TRANSPORT_HEADERS}


def kept_headers(headers: list[tuple[bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    """A receiver's response headers as text, bounded in count and size."""
    return tuple(
        (
            name[:KEPT_HEADER_CHARS].decode("utf-8", errors="replace"),
            value[:KEPT_HEADER_CHARS].decode("utf-8", errors="replace"),
        )
        for name, value in headers[:KEPT_HEADERS]
    )


def open_files_allow(*, concurrency: int) -> tuple[int, int]:
    """Raise this process's soft limit on open files to what `concurrency`
    sends need, as far as the hard limit lets an unprivileged process.

    Returns (the soft limit now, what was wanted). Past the limit a send
    cannot open its socket and fails as a connection error: the receiver
    would be blamed, and its breaker moved, for a shortage of our own.
    """
    wanted = FILES_PER_SLOT * concurrency + FILES_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft, wanted
    raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if raised > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    return max(raised, soft), wanted


class AsyncSender:
    """Sends on one pool of keep-alive connections (pool.Pool) per sender.

    Create it, await send() from one event loop, and await close() on that loop.
    """

    # Every attempt ends within `timeout` (send() awaits nothing outside its
    # asyncio.timeout), so the send loop adds no deadline of its own.
    keeps_deadline = True

    def __init__(
        self,
        *,
        timeout: float,
        body_limit: int,
        allow_private: bool,
        limit: int = CONNECTION_LIMIT,
        resolve: destinations.Resolver | None = None,
        # The trust of every https send (None: the system's,
        # ssl.create_default_context()). An endpoint with a client
        # certificate and no CA bundle of its own trusts the CA certificates
        # loaded into it (client_tls.ClientContexts).
        ssl_context: ssl.SSLContext | None = None,
        # Times the request within its asyncio.timeout; run_dispatcher gives
        # it the dispatcher's clock, tests may give theirs.
        monotonic: Callable[[], float] = time.monotonic,
        # RELAY_EGRESS_PROXY: every connection tunnels through this CONNECT
        # proxy (tunnel.py); "" connects directly. A malformed URL raises
        # ValueError here, before anything is sent.
        proxy: str = "",
    ) -> None:
        self.timeout = timeout
        self.body_limit = body_limit
        self.allow_private = allow_private
        self.monotonic = monotonic
        self._addresses = CheckedAddresses(
            allow_private=allow_private,
            resolve=resolve,
            # Half the send's time at most: a lookup that never answers is
            # the name's dns_error, ended before the send's own deadline.
            lookup_timeout=min(DNS_TIMEOUT_SECONDS, timeout / 2),
        )
        self._pool = pool.Pool(
            limit=limit,
            keepalive=KEEPALIVE_SECONDS,
            body_limit=body_limit,
            addresses=self._addresses,
            # Always verified, with the URL's host as the name checked and sent
            # as SNI; None is the system's default context, made on first use.
            ssl_context=ssl_context,
            proxy=tunnel.proxy_from_url(proxy),
        )

    async def close(self) -> None:
        self._pool.close()
        self._addresses.close()

    async def send(self, request: OutgoingRequest) -> SendResult:
        started = self.monotonic()

        def result(kind: str, message: str) -> SendResult:
            ms = (self.monotonic() - started) * 1000
            return SendResult(None, ms, kind, message[:500])

        try:
            check_literal(request.url, allow_private=self.allow_private)
            target = target_of(request.url)
            framed = frame(target, wire_headers(request), request.body)
        except destinations.DestinationRefused as refused:
            return result(_refusal_kind(refused), refused.reason)
        except ValueError as exc:  # a header that would break the framing
            return result(ErrorKind.CONNECTION, f"not sent: {exc}")
        exchange = http1.Exchange()
        timeout = request.timeout or self.timeout
        try:
            async with asyncio.timeout(timeout):
                response = await self._pool.post(
                    target, framed, exchange, request.tenant, request.client_tls
                )
        except TimeoutError:
            if exchange.tunnelling:
                return result(
                    ErrorKind.PROXY_ERROR,
                    f"the egress proxy gave no tunnel within {timeout:g} s",
                )
            return result(ErrorKind.TIMEOUT, _late(exchange.status_seen(), timeout))
        except asyncio.CancelledError:
            raise
        except destinations.DestinationRefused as refused:  # by the address check
            return result(_refusal_kind(refused), refused.reason)
        except Exception as exc:  # a receiver must never crash a dispatcher  # noqa: BLE001
            return result(_error_kind(exc), _short(exc))
        headers = response.headers
        return SendResult(
            status_code=response.status,
            duration_ms=(self.monotonic() - started) * 1000,
            body_excerpt=response.body.decode("utf-8", errors="replace"),
            retry_after=_retry_after(headers),
            response_headers=kept_headers(headers),
        )


def _late(status: int, timeout: float) -> str:
    if status:
        return f"status {status}, but the body did not arrive within {timeout:g} s"
    return f"no complete response head within {timeout:g} s"


@functools.lru_cache(maxsize=4096)
def target_of(url: str) -> pool.Target:
    """Where url's requests go (check_literal has refused a malformed url)."""
    parsed = URL(url)  # the parser the destination policy judged the host with
    host = parsed.raw_host or ""
    scheme = parsed.scheme
    port = parsed.port or destinations.DEFAULT_PORTS[scheme]
    path = parsed.raw_path_qs or "/"
    head = f"POST {path} HTTP/1.1\r\nHost: {parsed.host_port_subcomponent}\r\n"
    return pool.Target(
        key=(scheme, host, port),
        host=host,
        port=port,
        tls=scheme == "https",
        head=head.encode("ascii"),
    )


# The framing's own headers: one Host and one Content-Length, always ours.
FRAMING_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection"}
)


def frame(target: pool.Target, headers: dict[str, str], body: bytes) -> bytes:
    """The request's bytes: target's request line and Host, then headers in
    order, Content-Length and the body."""
    if any(name.lower() in FRAMING_HEADERS for name in headers):
        # Saving refuses these names; a row from before that check must not
        # put a second Host or length on the wire.
        headers = {
            name: value
            for name, value in headers.items()
            if name.lower() not in FRAMING_HEADERS
        }
    lines = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
    # Endpoint headers are checked when saved; this is the last line of
    # defence against one that would add a header or a request of its own.
    if lines.count("\n") != len(headers) or lines.count("\r") != len(headers):
        raise ValueError("a header name or value contains a line break")
    return b"".join(
        (target.head, lines.encode(), b"Content-Length: %d\r\n\r\n" % len(body), body)
    )


def _retry_after(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if len(name) == 11 and name.lower() == b"retry-after":
            return value.decode("utf-8", errors="replace")
    return None


def _refusal_kind(refused: destinations.DestinationRefused) -> str:
    # A name that does not resolve right now is a DNS error (retried);
    # anything else the policy refuses is permanent.
    return (
        ErrorKind.DNS
        if refused.code == ErrorKind.DNS
        else ErrorKind.DESTINATION_BLOCKED
    )


def _error_kind(exc: Exception) -> str:
    if isinstance(exc, tunnel.ProxyFailed):  # before the tunnel was up
        return ErrorKind.PROXY_ERROR
    if isinstance(exc, ssl.SSLError | client_tls.TlsFailed):  # certificates too
        return ErrorKind.TLS
    if isinstance(exc, http1.ResponseError):
        return ErrorKind.INVALID_RESPONSE
    return ErrorKind.CONNECTION


def _short(exc: BaseException) -> str:
    """What went wrong, in words for people; never a Python class name where
    the socket or the receiver said something plainer."""
    if isinstance(exc, http1.ResponseError):
        return f"the response could not be parsed: {exc}"[:500]
    if isinstance(exc, pool.ConnectFailed):
        where = f"{exc.host}:{exc.port}"
        if isinstance(exc.error, ConnectionRefusedError):
            return f"Connection refused ({where})"
        reason = exc.error.strerror or str(exc.error) or type(exc.error).__name__
        return f"Could not connect to {where}: {reason}"[:500]
    if isinstance(exc, ssl.SSLError):  # from the handshake (pool.py)
        return client_tls.describe(exc)[:500]
    if isinstance(exc, http1.Disconnected | tunnel.ProxyFailed | client_tls.TlsFailed):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:500]
