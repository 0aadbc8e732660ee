"""The sender's connections: a pool of keep-alive HTTP/1.1 connections
(http1.Connection) per (scheme, host, port), dialled only to the addresses
the destination policy checked (resolver.CheckedAddresses). With an egress
proxy (tunnel.py) each connection is a tunnel through it to such an address,
and the proxy joins the pool's key. An endpoint with a client certificate
or a CA bundle of its own (client_tls.py) gets connections of its own too:
its identity's fingerprint joins the key, so no connection made with one
identity or trust is ever used for another.

At most `limit` connections are in use at once (a send past it waits, its
deadline running) and at most `limit` are kept idle, each closed after
`keepalive` seconds or as soon as its receiver closes it: a sender needs at
most two sockets per send slot (transport.FILES_PER_SLOT).
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

import aiohappyeyeballs

from deliveries.dispatch.client_tls import ClientContexts, TlsFailed, describe
from deliveries.dispatch.credentials import ClientTls
from deliveries.dispatch.http1 import Connection, Disconnected, Exchange, Response
from deliveries.dispatch.tunnel import Proxy, open_tunnel

HAPPY_EYEBALLS_DELAY = 0.25


class ConnectFailed(Exception):
    """No address of the host took a connection; .error says why."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        super().__init__(f"{host}:{port}: {error}")
        self.host, self.port, self.error = host, port, error


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL's request goes, parsed once per URL (transport.target_of)."""

    key: tuple[str, str, int]  # scheme, host, port: the pool a connection joins
    host: str  # the host to resolve, and the TLS server name
    port: int
    tls: bool
    head: bytes  # "POST <path> HTTP/1.1\r\nHost: <host>\r\n"


def _addr_info(address: str, port: int):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return (family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))


# (host, port, tenant) -> the checked addresses; the tenant's lookups are bounded.
AddressLookup = Callable[[str, int, Hashable], Awaitable[list[str]]]


class Pool:
    """Keep-alive connections by (scheme, host, port), at most `limit` in use
    at once; idle ones are closed after `keepalive` seconds, and never more
    than `limit` are kept idle."""

    def __init__(
        self,
        *,
        limit: int,
        keepalive: float,
        body_limit: int,
        addresses: AddressLookup,
        ssl_context: ssl.SSLContext | None,
        proxy: Proxy | None = None,
    ) -> None:
        self.limit = limit
        self.keepalive = keepalive
        self.body_limit = body_limit
        self.addresses = addresses
        self.ssl_context = ssl_context
        self.proxy = proxy
        self.client_contexts = ClientContexts(ssl_context)
        self._slots: asyncio.Semaphore | None = None
        self._idle: dict[tuple, list[Connection]] = {}
        self._idle_count = 0
        self._sweep: asyncio.TimerHandle | None = None

    async def post(
        self,
        target: Target,
        request: bytes,
        exchange: Exchange,
        tenant: Hashable = None,
        client_tls: ClientTls | None = None,
    ) -> Response:
        """Send request (head and body, framed) to target; the answer. A
        lookup of target's host counts against tenant's (a merchant's) slots.
        client_tls: the endpoint's certificate and trust, None the default."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        # A tunnel is never taken for a direct connection, nor one through
        # another proxy: the proxy is part of what a connection is.
        key = target.key if self.proxy is None else (*target.key, self.proxy)
        context = None
        if client_tls is not None and target.tls:
            # A new identity's context is built on a thread, its deadline
            # running, while the loop's other sends go on.
            fingerprint, context = await self.client_contexts.context_of(client_tls)
            key = (*key, fingerprint)
        async with self._slots:
            connection = self._take_idle(key)
            fresh = connection is None
            if connection is None:
                connection = await self._connect(target, tenant, exchange, context)
            exchange.connection = connection
            try:
                response = await connection.start(request)
            except ssl.SSLError as exc:  # an alert or a broken record, read
                connection.abort()
                raise TlsFailed(describe(exc, handshake=False)) from exc
            except Disconnected as exc:
                connection.abort()
                if fresh and client_tls is not None and _refused_late(connection):
                    raise TlsFailed(
                        self.client_contexts.refused_on_first_read(client_tls)
                    ) from exc
                raise
            except BaseException:
                connection.abort()  # failed, timed out or cancelled mid-answer
                raise
            self._give_back(key, connection)
            return response

    def _take_idle(self, key) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()  # the newest: the likeliest to be alive
            self._idle_count -= 1
            connection.on_idle_lost = None
            if (
                not connection.closed
                and not connection.transport.is_closing()  # type: ignore[union-attr]
                and now - connection.idle_since < self.keepalive
            ):
                return connection
            connection.abort()
        return None

    async def _connect(
        self,
        target: Target,
        tenant: Hashable,
        exchange: Exchange,
        context: ssl.SSLContext | None,
    ) -> Connection:
        loop = asyncio.get_running_loop()
        if target.tls and context is None:
            if self.ssl_context is None:
                self.ssl_context = ssl.create_default_context()
            context = self.ssl_context
        addresses = await self.addresses(target.host, target.port, tenant)
        if self.proxy is not None:
            return await self._tunnel(target, addresses, context, exchange)
        try:
            if len(addresses) == 1:
                host, sock = addresses[0], None
            else:
                # Happy Eyeballs (RFC 8305), as aiohttp's connector did: the
                # next address is tried 0.25 s after the last, so one that
                # drops packets cannot spend the whole deadline.
                host, sock = (
                    None,
                    await aiohappyeyeballs.start_connection(
                        [_addr_info(a, target.port) for a in addresses],
                        happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
                    ),
                )
            _, connection = await loop.create_connection(
                lambda: Connection(self.body_limit),
                host,
                target.port if sock is None else None,
                sock=sock,
                ssl=context,
                # Checked against the certificate and sent as SNI: the URL's
                # host, without the trailing dot of a fully qualified name.
                server_hostname=target.host.rstrip(".") if context else None,
            )
            return connection
        except ssl.SSLError:
            raise  # the certificate or the handshake: classified by the caller
        except OSError as exc:  # refused, unreachable, reset
            raise ConnectFailed(target.host, target.port, exc) from exc

    async def _tunnel(
        self,
        target: Target,
        addresses: list[str],
        context: ssl.SSLContext | None,
        exchange: Exchange,
    ) -> Connection:
        """A connection through the egress proxy to the first checked address
        it reaches; TLS inside the tunnel checks the URL's host, as direct."""
        exchange.tunnelling = True  # a deadline that ends now is the proxy's
        raw = await open_tunnel(self.proxy, addresses, target.port)  # type: ignore[arg-type]
        exchange.tunnelling = False
        connection = Connection(self.body_limit)
        if context is None:
            raw.set_protocol(connection)
            connection.connection_made(raw)
            raw.resume_reading()
            return connection
        # start_tls closes the tunnel itself if the handshake fails.
        secured = await asyncio.get_running_loop().start_tls(
            raw, connection, context, server_hostname=target.host.rstrip(".")
        )
        connection.connection_made(secured)  # start_tls does not call it
        return connection

    def _give_back(self, key, connection: Connection) -> None:
        if not connection.reusable or connection.closed:
            connection.abort()
            return
        if self._idle_count >= self.limit:
            connection.abort()
            return
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        self._idle.setdefault(key, []).append(connection)
        self._idle_count += 1
        connection.on_idle_lost = functools.partial(self._forget, key)
        if self._sweep is None:
            self._sweep = loop.call_later(self.keepalive, self._close_stale)

    def _forget(self, key, connection: Connection) -> None:
        """A receiver closed an idle connection: its place is free now."""
        connection.on_idle_lost = None
        idle = self._idle.get(key)
        if idle is not None and connection in idle:
            idle.remove(connection)
            self._idle_count -= 1

    def _close_stale(self) -> None:
        self._sweep = None
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - self.keepalive
        for key, idle in list(self._idle.items()):
            keep = []
            for connection in idle:
                if not connection.closed and connection.idle_since > cutoff:
                    keep.append(connection)
                else:
                    connection.abort()
                    self._idle_count -= 1
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        if self._idle_count:
            self._sweep = loop.call_later(self.keepalive / 2, self._close_stale)

    def close(self) -> None:
        self.client_contexts.close()
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for idle in self._idle.values():
            for connection in idle:
                connection.abort()
        self._idle.clear()
        self._idle_count = 0


def _refused_late(connection: Connection) -> bool:
    """Whether a new connection closed before answering its first request
    was most likely refused at the handshake: under TLS 1.3 the receiver
    judges the client's certificate (or its absence) after the client's
    handshake has ended, and its alert is lost when it closes with our
    request unread (the reset discards it). Asked only for an endpoint with
    an identity of its own: on the default path a close stays a close."""
    if connection.head_done or connection.transport is None:
        return False
    ssl_object = connection.transport.get_extra_info("ssl_object")
    return ssl_object is not None and ssl_object.version() == "TLSv1.3"
