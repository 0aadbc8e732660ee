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
import resource
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from deliveries.dispatch.resolver import PolicyResolver, check_literal, refusal_in
from deliveries.models import ErrorKind
from deliveries.request import TRANSPORT_HEADERS
from endpoints import destinations

CONNECTION_LIMIT = 512  # sockets open at once per sender; sends past it wait
KEEPALIVE_SECONDS = 30  # an idle connection to a receiver is kept this long
# The response head is bounded: a status line or header line longer than this,
# or more headers than MAX_HEADERS, ends the attempt as invalid_response.
MAX_LINE_BYTES = 8190
MAX_HEADERS = 128
# Response headers kept for people on the attempt (outcomes sanitises them):
# the first KEPT_HEADERS, each value cut to KEPT_HEADER_CHARS.
KEPT_HEADERS = 40
KEPT_HEADER_CHARS = 300
# Open files a sender needs per send slot: its socket, and as many again for
# idle keep-alive connections (aiohttp's limit counts only sockets in use),
# plus a few for the database, logs and the loop itself.
FILES_PER_SLOT = 2
FILES_SPARE = 64


@dataclass(frozen=True)
class OutgoingRequest:
    url: str
    headers: dict[str, str]
    body: bytes


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


class Sender(Protocol):
    """What the send loop sends with: AsyncSender, or a test's blocking double
    (tests/fakes.py), which the loop runs on threads of its own."""

    def send(self, request: OutgoingRequest) -> Awaitable[SendResult] | SendResult: ...


def wire_headers(request: OutgoingRequest) -> dict[str, str]:
    """The headers send() puts on the wire for request, in that order."""
    return {**request.headers, **TRANSPORT_HEADERS}


def kept_headers(headers) -> tuple[tuple[str, str], ...]:
    """A receiver's response headers, bounded in count and size."""
    kept = []
    for name, value in headers.items():
        if len(kept) == KEPT_HEADERS:
            break
        kept.append((name[:KEPT_HEADER_CHARS], value[:KEPT_HEADER_CHARS]))
    return tuple(kept)


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
    """Sends on one aiohttp session (one connection pool, keep-alive) per sender.

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
        ssl_context: ssl.SSLContext | None = None,
        # Times the request within its asyncio.timeout; run_dispatcher gives
        # it the dispatcher's clock, tests may give theirs.
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.body_limit = body_limit
        self.allow_private = allow_private
        self.limit = limit
        self.resolve = resolve
        self.ssl_context = ssl_context
        self.monotonic = monotonic
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.limit,
                limit_per_host=0,  # per-endpoint limits are the dispatcher's
                resolver=PolicyResolver(
                    allow_private=self.allow_private, resolve=self.resolve
                ),
                # Only addresses the policy checked are cached, for 10 s.
                use_dns_cache=True,
                ttl_dns_cache=10,
                keepalive_timeout=KEEPALIVE_SECONDS,
                ssl=self.ssl_context or True,  # always verified, SNI = URL host
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # Keep the raw bytes: a small gzip or brotli body may inflate
                # to gigabytes, and the body is only an excerpt for people.
                auto_decompress=False,
                # Environment proxies would resolve the host after our check,
                # and ~/.netrc would add credentials to a merchant's URL.
                trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None),  # asyncio.timeout below
                read_bufsize=max(self.body_limit, 1024),
                max_line_size=MAX_LINE_BYTES,
                max_field_size=MAX_LINE_BYTES,
                max_headers=MAX_HEADERS,
                cookie_jar=aiohttp.DummyCookieJar(),  # no state between merchants
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def send(self, request: OutgoingRequest) -> SendResult:
        started = self.monotonic()

        def result(kind: str, message: str, status: int | None = None) -> SendResult:
            ms = (self.monotonic() - started) * 1000
            return SendResult(status, ms, kind, message[:500])

        try:
            check_literal(request.url, allow_private=self.allow_private)
        except destinations.DestinationRefused as refused:
            return result(_refusal_kind(refused), refused.reason)
        response: aiohttp.ClientResponse | None = None
        complete = False
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._client().post(
                    request.url,
                    data=request.body,
                    headers=wire_headers(request),
                    allow_redirects=False,
                )
                excerpt, complete = await self._read_excerpt(response)
        except TimeoutError:
            if response is None:
                return result(
                    ErrorKind.TIMEOUT,
                    f"no complete response head within {self.timeout:g} s",
                )
            return result(
                ErrorKind.TIMEOUT,
                f"status {response.status}, but the body did not arrive "
                f"within {self.timeout:g} s",
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a receiver must never crash a dispatcher  # noqa: BLE001
            refused = refusal_in(exc)
            if refused is not None:  # by the resolver, at connect time
                return result(_refusal_kind(refused), refused.reason)
            return result(_error_kind(exc), _short(exc))
        finally:
            if response is not None:
                # A body read to its end leaves a connection fit to reuse;
                # anything else (cut at the limit, timed out) is closed.
                response.release() if complete else response.close()
        return SendResult(
            status_code=response.status,
            duration_ms=(self.monotonic() - started) * 1000,
            body_excerpt=excerpt.decode("utf-8", errors="replace"),
            retry_after=response.headers.get("Retry-After"),
            response_headers=kept_headers(response.headers),
        )

    async def _read_excerpt(
        self, response: aiohttp.ClientResponse
    ) -> tuple[bytes, bool]:
        """Up to body_limit raw bytes, and whether that was the whole body.

        What lies past the limit is never read: the connection is closed instead.
        """
        chunks: list[bytes] = []
        size = 0
        while size < self.body_limit:
            chunk = await response.content.read(self.body_limit - size)
            if not chunk:
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
            if response.content.at_eof():
                # The usual short answer: all of it came with the head, and
                # another read would only be told so.
                return b"".join(chunks), True
        return b"".join(chunks), response.content.at_eof()


def _refusal_kind(refused: destinations.DestinationRefused) -> str:
    # A name that does not resolve right now is a DNS error (retried);
    # anything else the policy refuses is permanent.
    return (
        ErrorKind.DNS
        if refused.code == ErrorKind.DNS
        else ErrorKind.DESTINATION_BLOCKED
    )


def _error_kind(exc: Exception) -> str:
    if isinstance(exc, aiohttp.InvalidURL):
        # Forms aiohttp itself refuses to connect to (e.g. 127.1): the URL
        # must change before a resend can help.
        return ErrorKind.DESTINATION_BLOCKED
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ErrorKind.DNS
    if isinstance(
        exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError
    ) or isinstance(exc, ssl.SSLError):
        return ErrorKind.TLS
    if isinstance(exc, aiohttp.ClientResponseError):
        # The status line or headers could not be parsed, or broke a limit.
        return ErrorKind.INVALID_RESPONSE
    return ErrorKind.CONNECTION


def _short(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientResponseError):
        # Its status is aiohttp's (400 = "could not parse"), not the receiver's.
        return f"the response could not be parsed: {exc.message}"[:500]
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(
        exc, aiohttp.ClientSSLError
    ):
        # What the socket said, for people: "Connection refused (127.0.0.1:9)",
        # not aiohttp's "Cannot connect to host ... ssl:default [...]".
        where = f"{exc.host}:{exc.port}"
        if isinstance(exc.os_error, ConnectionRefusedError):
            return f"Connection refused ({where})"
        reason = exc.os_error.strerror or type(exc.os_error).__name__
        return f"Could not connect to {where}: {reason}"[:500]
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "The receiver closed the connection before answering"
    return f"{type(exc).__name__}: {exc}"[:500]
