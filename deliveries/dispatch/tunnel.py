"""The egress proxy (RELAY_EGRESS_PROXY): a send's connection tunnelled
through an HTTP CONNECT proxy (RFC 9110 9.3.6), such as Smokescreen or Squid
in front of the static addresses a receiver allow-lists.

The destination policy is the relay's, not the proxy's: the receiver's host
is resolved and checked as for a direct send (resolver.CheckedAddresses),
and the tunnel is asked for that checked address (CONNECT 203.0.113.7:443),
so the address pinned at send is the one reached. TLS then runs inside the
tunnel with the URL's host as SNI and as the name the certificate must
carry. The proxy's own address is trusted because the operator set it: it
may be loopback or private, and is never judged by the policy.

Until the tunnel is up every failure is the proxy's (ProxyFailed: refused,
closed, a non-2xx answer to CONNECT); the transport calls that proxy_error,
which spends none of the endpoint's attempts and moves no breaker
(outcomes.py). Once the tunnel is up, failures are the receiver's, as on a
direct connection.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from urllib.parse import unquote

from yarl import URL

# The proxy's answer to CONNECT is a status line and a few headers; one that
# runs past this is not an answer the relay waits for.
MAX_ANSWER_BYTES = 8192
REASON_CHARS = 100  # of the proxy's reason phrase, kept in the attempt's message


class ProxyFailed(Exception):
    """The egress proxy gave no tunnel; str() says why, without credentials."""


@dataclass(frozen=True, slots=True)
class Proxy:
    """Where tunnels are asked for, and the Proxy-Authorization they carry."""

    host: str
    port: int
    authorization: str = field(default="", repr=False)  # "Basic ..." or ""

    @property
    def where(self) -> str:
        return _authority(self.host, self.port)


def proxy_from_url(url: str) -> Proxy | None:
    """RELAY_EGRESS_PROXY parsed: http://[user:password@]host:port, or None
    for "". Anything else raises ValueError naming what is wrong."""
    url = url.strip()
    if not url:
        return None
    wrong = "RELAY_EGRESS_PROXY must be an http://host:port URL of a CONNECT proxy"
    try:
        parsed = URL(url)
    except ValueError as exc:
        raise ValueError(f"{wrong} ({exc})") from None
    if parsed.scheme != "http" or not parsed.raw_host:
        raise ValueError(wrong)
    if parsed.raw_path not in ("", "/") or parsed.raw_query_string:
        raise ValueError("RELAY_EGRESS_PROXY takes no path or query: http://host:port")
    authorization = ""
    if parsed.raw_user is not None:
        pair = f"{unquote(parsed.raw_user)}:{unquote(parsed.raw_password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return Proxy(
        host=parsed.raw_host, port=parsed.port or 80, authorization=authorization
    )


def connect_line(proxy: Proxy, address: str, port: int) -> bytes:
    """The CONNECT request for a checked address (an IPv6 one in brackets)."""
    authority = _authority(address, port)
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def _authority(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


class _Handshake(asyncio.Protocol):
    """Reads the proxy's answer to one CONNECT, then stops reading: what
    follows belongs to whoever takes the transport over."""

    def __init__(self) -> None:
        self.answered: asyncio.Future[bytes] = (
            asyncio.get_running_loop().create_future()
        )
        self.transport: asyncio.Transport | None = None
        self._head = bytearray()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.answered.done():
            return
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            if len(self._head) > MAX_ANSWER_BYTES:
                self._fail(f"answered CONNECT with over {MAX_ANSWER_BYTES} bytes")
            return
        if end + 4 != len(self._head):
            # Neither HTTP nor TLS lets the receiver speak first: bytes past
            # the answer would be taken for the receiver's.
            self._fail("sent bytes after its answer to CONNECT")
            return
        self.transport.pause_reading()  # type: ignore[union-attr]
        self.answered.set_result(bytes(self._head[:end]))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answered.done():
            self.answered.set_exception(
                ProxyFailed(
                    "the egress proxy closed the connection before answering CONNECT"
                )
            )

    def _fail(self, what: str) -> None:
        self.answered.set_exception(ProxyFailed(f"the egress proxy {what}"))
        self.transport.abort()  # type: ignore[union-attr]


def _status(head: bytes) -> tuple[int, str]:
    """(status, reason) of the answer's status line; (0, "") if there is none."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return 0, ""
    reason = parts[2] if len(parts) == 3 else ""
    reason = "".join(c for c in reason if c.isprintable())[:REASON_CHARS]
    return int(parts[1]), reason


class _Refused(ProxyFailed):
    """The proxy answered CONNECT with a status that is not 2xx."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _tunnel_to(proxy: Proxy, address: str, port: int) -> asyncio.Transport:
    loop = asyncio.get_running_loop()
    try:
        transport, handshake = await loop.create_connection(
            _Handshake, proxy.host, proxy.port
        )
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ProxyFailed(
            f"could not connect to the egress proxy {proxy.where}: {reason}"
        ) from exc
    try:
        transport.write(connect_line(proxy, address, port))
        status, reason = _status(await handshake.answered)
    except BaseException:
        transport.abort()
        raise
    if 200 <= status < 300:
        return transport
    transport.abort()
    if not status:
        raise ProxyFailed("the egress proxy's answer to CONNECT is not HTTP")
    raise _Refused(status, f"the egress proxy answered {status} {reason}".rstrip())


async def open_tunnel(
    proxy: Proxy, addresses: list[str], port: int
) -> asyncio.Transport:
    """A transport through proxy to the first of addresses (checked by the
    policy) that it reaches, read paused. The next address is tried only
    when the proxy says it could not reach one (a 5xx answer): a refusal
    (403, 407) would be the same for every address."""
    for i, address in enumerate(addresses):
        try:
            return await _tunnel_to(proxy, address, port)
        except _Refused as refused:
            if refused.status < 500 or i == len(addresses) - 1:
                where = _authority(address, port)
                raise ProxyFailed(f"{refused} to CONNECT {where}") from None
    raise ProxyFailed("no address to ask the egress proxy for")
