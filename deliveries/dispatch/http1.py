"""HTTP/1.1 POSTs on pooled keep-alive connections, with little Python each.

Why not aiohttp's client, which the dispatcher used before: the dispatcher
spends most of its CPU per delivery in its HTTP client, and aiohttp's
ClientSession builds a request object, a response object, header multidicts,
timers and trace hooks for every send, 100-120 us of CPU a request here
against 20-30 for a bare protocol (bench/client_cost.py). A relay needs
none of that: one method, a prebuilt head, a body it already holds, and an
answer it reads only an excerpt of. So this module frames the request itself
and leaves parsing the answer to httptools (llhttp, Node's parser, in C).

What a hostile receiver can do is bounded here: a status line or header line
longer than MAX_LINE_BYTES, more than MAX_HEADERS headers, or a head over
MAX_HEAD_BYTES ends the attempt (ResponseError); at most body_limit bytes of
the body are kept, and a connection whose body was cut, or that answered out
of turn, is never reused. Deadlines are the caller's (transport.py wraps each
send in one asyncio.timeout); a cancelled send closes its connection.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httptools

MAX_LINE_BYTES = 8190
MAX_HEADERS = 128
MAX_HEAD_BYTES = 65536


class ResponseError(Exception):
    """The response head could not be parsed, or broke a limit."""


class Disconnected(Exception):
    """The connection ended before the response did."""

    def __init__(self, message: str, *, had_head: bool) -> None:
        super().__init__(message)
        self.had_head = had_head


class ConnectFailed(Exception):
    """No address of the host took a connection; .error is the last OSError."""

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


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: list[tuple[bytes, bytes]]  # as received, in order
    body: bytes  # at most the body limit
    complete: bool  # the whole body was read


class Exchange:
    """One request's connection, kept so that a caller whose deadline ran
    out can still say whether the answer's head had arrived."""

    __slots__ = ("connection",)

    def __init__(self) -> None:
        self.connection: Connection | None = None

    def status_seen(self) -> int:
        """The answer's status if its head arrived, else 0."""
        connection = self.connection
        return connection.status if connection is not None else 0


class _Stop(Exception):
    """Raised from a parser callback to stop parsing what follows."""


class Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, answered through
    the future start() returns."""

    def __init__(self, body_limit: int) -> None:
        self.body_limit = body_limit
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        # Receivers that answer with bare LF line ends or odd bytes in header
        # values still get their status read, as aiohttp's client read them
        # (the same three leniencies): a sloppy receiver that took a delivery
        # must not be retried and tripped for its framing. NUL is still refused
        # (on_header), and nothing from the head is trusted beyond an excerpt.
        self.parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_optional_cr_before_lf=True,
            lenient_spaces_after_chunk_size=True,
        )
        self.closed = False
        self.reusable = True
        self.idle_since = 0.0
        self._waiter: asyncio.Future | None = None
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.head_done = False
        self._head_bytes = 0
        self._parsed_bytes = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._size = 0

    def start(self, request: bytes) -> asyncio.Future:
        self._reset()
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)  # type: ignore[union-attr]
        return waiter

    def abort(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    # asyncio.Protocol

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            # Bytes nobody asked for: this connection's framing is not ours.
            self.abort()
            return
        if not self.head_done:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, ResponseError):
                self._fail(cause)
            elif not isinstance(cause, _Stop):
                self._fail(ResponseError(str(cause or exc)))
        except httptools.HttpParserUpgrade:
            self._finish(complete=False)  # 101 and the like: not HTTP any more
        except httptools.HttpParserError as exc:
            self._fail(ResponseError(str(exc) or type(exc).__name__))
        if not self.head_done:
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(ResponseError(f"the head is over {MAX_HEAD_BYTES} bytes"))
        elif self._size >= self.body_limit and self._waiter is not None:
            # The excerpt is full and the answer did not end with this read:
            # nothing more is waited for (a body of exactly the limit that
            # ends in the same read has already completed).
            self._finish(complete=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._waiter is None or self._waiter.done():
            return
        if self.head_done and self._until_eof():
            self._finish(complete=True)  # a body delimited by the close
            return
        how = "reset" if isinstance(exc, ConnectionResetError) else "closed"
        self._fail(
            Disconnected(
                f"The receiver {how} the connection before the body was complete"
                if self.head_done
                else f"The receiver {how} the connection before answering",
                had_head=self.head_done,
            )
        )

    # httptools callbacks (it looks them up by name)

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            self.reusable = False
            raise _Stop

    def on_status(self, piece: bytes) -> None:
        self._parsed_bytes += len(piece)  # then each header adds its own
        if self._parsed_bytes > MAX_LINE_BYTES:
            raise ResponseError(f"the status line is over {MAX_LINE_BYTES} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self._headers) == MAX_HEADERS:
            raise ResponseError("Too many headers received")
        line = len(name) + len(value)
        if line > MAX_LINE_BYTES:
            raise ResponseError(f"a header line is over {MAX_LINE_BYTES} bytes")
        if (
            b"\x00" in value
        ):  # lenient_headers lets it through; stored text can't hold it
            raise ResponseError("Invalid header value char")
        # The head as parsed (data_received bounds a head still arriving; this,
        # one that came whole in a single read).
        self._parsed_bytes += line + 4
        if self._parsed_bytes > MAX_HEAD_BYTES:
            raise ResponseError(f"the head is over {MAX_HEAD_BYTES} bytes")
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._reset()  # informational (100 Continue): the answer follows
            return
        self.status = status
        self.head_done = True

    def on_body(self, piece: bytes) -> None:
        room = self.body_limit - self._size
        if len(piece) > room:
            if room > 0:
                self._body.append(piece[:room])
                self._size += room
            self._finish(complete=False)  # cut: what lies past is never kept
            raise _Stop
        self._body.append(piece)
        self._size += len(piece)

    def on_message_complete(self) -> None:
        if self.head_done:
            self.reusable = self.reusable and self.parser.should_keep_alive()
            self._finish(complete=True)

    # Ending the current request

    def _until_eof(self) -> bool:
        if self.status in (204, 304):
            return False
        for name, value in self._headers:
            lower = name.lower()
            if lower == b"content-length" or (
                lower == b"transfer-encoding" and b"chunked" in value.lower()
            ):
                return False
        return True

    def _finish(self, *, complete: bool) -> None:
        if not complete:
            self.reusable = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            waiter.set_result(Response(self.status, self._headers, body, complete))

    def _fail(self, error: Exception) -> None:
        self.reusable = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        if self.transport is not None:
            self.transport.abort()


AddressLookup = Callable[[str, int], Awaitable[list[str]]]


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
    ) -> None:
        self.limit = limit
        self.keepalive = keepalive
        self.body_limit = body_limit
        self.addresses = addresses
        self.ssl_context = ssl_context
        self._slots: asyncio.Semaphore | None = None
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._idle_count = 0
        self._sweep: asyncio.TimerHandle | None = None

    async def post(
        self, target: Target, request: bytes, exchange: Exchange
    ) -> Response:
        """Send request (head and body, framed) to target; the answer."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        async with self._slots:
            connection = self._take_idle(target.key) or await self._connect(target)
            exchange.connection = connection
            try:
                response = await connection.start(request)
            except BaseException:
                connection.abort()  # failed, timed out or cancelled mid-answer
                raise
            self._give_back(target.key, connection)
            return response

    def _take_idle(self, key) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()  # the newest: the likeliest to be alive
            self._idle_count -= 1
            if (
                not connection.closed
                and not connection.transport.is_closing()  # type: ignore[union-attr]
                and now - connection.idle_since < self.keepalive
            ):
                return connection
            connection.abort()
        return None

    async def _connect(self, target: Target) -> Connection:
        loop = asyncio.get_running_loop()
        context = None
        if target.tls:
            if self.ssl_context is None:
                self.ssl_context = ssl.create_default_context()
            context = self.ssl_context
        last: OSError | None = None
        for address in await self.addresses(target.host, target.port):
            try:
                _, connection = await loop.create_connection(
                    lambda: Connection(self.body_limit),
                    address,
                    target.port,
                    ssl=context,
                    server_hostname=target.host if context else None,
                )
                return connection
            except ssl.SSLError:
                raise  # the certificate or handshake: another address won't help
            except OSError as exc:
                last = exc  # refused or unreachable: try the next address
        raise ConnectFailed(target.host, target.port, last or OSError("no address"))

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
        if self._sweep is None:
            self._sweep = loop.call_later(self.keepalive, self._close_stale)

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
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for idle in self._idle.values():
            for connection in idle:
                connection.abort()
        self._idle.clear()
        self._idle_count = 0
