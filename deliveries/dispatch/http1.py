"""One HTTP/1.1 connection of the sender (pool.py keeps them), little Python a POST.

Why not aiohttp's client, which the dispatcher used before: the dispatcher
spends most of its CPU per delivery in its HTTP client, and aiohttp's
ClientSession builds a request object, a response object, header multidicts,
timers and trace hooks for every send, 100-120 us of CPU a request here
against 20-30 for a bare protocol (bench/client_cost.py). A relay needs
none of that: one method, a prebuilt head, a body it already holds, and an
answer it reads only an excerpt of. So the sender frames the request itself
(transport.frame) and this module leaves parsing the answer to httptools
(llhttp, Node's parser, in C).

What a hostile receiver can do is bounded here: a status line or header line
longer than MAX_LINE_BYTES, more than MAX_HEADERS headers, or a head over
MAX_HEAD_BYTES (informational answers included) ends the attempt
(ResponseError), as do chunk framing and trailers past the kept body's worth;
at most body_limit bytes of the body are kept, trailers never, and a
connection whose body was cut, or that answered out of turn, is never reused.
A status outside 100-599 is not an answer (ResponseError). The body is framed
as RFC 9112 6.3 says: chunked only when chunked is the final transfer coding,
else, with a Transfer-Encoding, read to the close; an answer framed as no
sender may frame one (Transfer-Encoding with Content-Length, chunked applied
twice, Transfer-Encoding on HTTP/1.0) is read as its Transfer-Encoding says,
and its connection is not used again.
Deadlines are the caller's (transport.py wraps each send in one
asyncio.timeout); a cancelled send closes its connection.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import httptools

MAX_LINE_BYTES = 8190
MAX_HEADERS = 128
MAX_HEAD_BYTES = 65536
# Receivers that answer with bare LF line ends or odd bytes in header values
# still get their status read, as aiohttp's client read them (the same three
# leniencies): a sloppy receiver that took a delivery must not be retried and
# tripped for its framing. NUL is still refused (on_header), and nothing from
# the head is trusted beyond an excerpt. lenient_chunked_length lets
# Transfer-Encoding win over a Content-Length beside it (RFC 9112 6.3), where
# llhttp would otherwise refuse the answer; such a connection is retired.
LENIENCIES = {
    "lenient_headers": True,
    "lenient_optional_cr_before_lf": True,
    "lenient_spaces_after_chunk_size": True,
    "lenient_chunked_length": True,
}


class ResponseError(Exception):
    """The response head could not be parsed, or broke a limit."""


class Disconnected(Exception):
    """The connection ended before the response did."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: list[tuple[bytes, bytes]]  # as received, in order
    body: bytes  # at most the body limit


class Exchange:
    """One request's connection, kept so that a caller whose deadline ran
    out can still say whether the answer's head had arrived, or whether it
    was still waiting for the egress proxy's tunnel (pool.py)."""

    __slots__ = ("connection", "tunnelling")

    def __init__(self) -> None:
        self.connection: Connection | None = None
        self.tunnelling = False

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
        self.parser.set_dangerous_leniencies(**LENIENCIES)
        self.closed = False
        self.reusable = True
        self.idle_since = 0.0
        # Set by the pool while the connection waits idle: a receiver's close
        # then frees its idle place at once, not at the next sweep.
        self.on_idle_lost: Callable[[Connection], None] | None = None
        self._waiter: asyncio.Future | None = None
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.head_done = False
        self._head_bytes = 0  # read before the head ended, 1xx answers included
        self._parsed_bytes = 0
        self._status_line = 0
        self._after_head = 0  # read since: body, chunk framing, trailers
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._size = 0
        self._until_close = False  # the body ends when the connection does

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
        else:
            self._after_head += len(data)
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
        elif self._after_head > MAX_HEAD_BYTES + 8 * self.body_limit:
            # More than the kept body's worth of chunk framing (1-byte chunks
            # cost 6 bytes each), plus a head's worth of trailers: an answer
            # that streams framing instead of a body is cut, not read forever.
            self._fail(ResponseError("the chunked framing or trailers are too long"))
        elif self._size >= self.body_limit and self._waiter is not None:
            # The excerpt is full and the answer did not end with this read:
            # nothing more is waited for (a body of exactly the limit that
            # ends in the same read has already completed).
            self._finish(complete=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self.on_idle_lost is not None:
            self.on_idle_lost(self)
        if self._waiter is None or self._waiter.done():
            return
        if self.head_done and self._until_close:
            self._finish(complete=True)  # a body delimited by the close
            return
        if isinstance(exc, ssl.SSLError):
            # An alert or a broken record ended it: TLS failed, the receiver
            # did not just close (under TLS 1.3 a refused client certificate
            # is seen only here, on the first read).
            self._fail(exc)
            return
        how = "reset" if isinstance(exc, ConnectionResetError) else "closed"
        self._fail(
            Disconnected(
                f"The receiver {how} the connection before the body was complete"
                if self.head_done
                else f"The receiver {how} the connection before answering"
            )
        )

    # httptools callbacks (it looks them up by name)

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            self.reusable = False
            raise _Stop
        self._status_line = 0

    def on_status(self, piece: bytes) -> None:
        self._status_line += len(piece)
        if self._status_line > MAX_LINE_BYTES:
            raise ResponseError(f"the status line is over {MAX_LINE_BYTES} bytes")
        self._parsed_bytes += len(piece)  # then each header adds its own

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head_done:
            return  # a chunked body's trailer: bounded by data_received, not kept
        if len(self._headers) == MAX_HEADERS:
            raise ResponseError("Too many headers received")
        line = len(name) + len(value)
        if line > MAX_LINE_BYTES:
            raise ResponseError(f"a header line is over {MAX_LINE_BYTES} bytes")
        # lenient_headers lets NUL through; the text stored can't hold it.
        if b"\x00" in value:
            raise ResponseError("Invalid header value char")
        # The head as parsed (data_received bounds a head still arriving; this,
        # one that came whole in a single read).
        self._parsed_bytes += line + 4
        if self._parsed_bytes > MAX_HEAD_BYTES:
            raise ResponseError(f"the head is over {MAX_HEAD_BYTES} bytes")
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if not 100 <= status <= 599:
            # llhttp takes any three digits; 000 or 999 is no HTTP answer.
            raise ResponseError(f"the status code {status:03d} is outside 100-599")
        if 100 <= status < 200 and status != 101:
            # Informational (100 Continue): the answer follows. Its headers go;
            # its bytes still count towards the head's limit, so a stream of
            # them ends like any other head that never ends.
            self._headers = []
            return
        self.status = status
        self.head_done = True
        self._frame()

    def on_body(self, piece: bytes) -> None:
        if not self.head_done:
            raise ResponseError("an informational answer carried a body")
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

    def _frame(self) -> None:
        """Whether the body ends at the close, and whether the framing allows
        the connection to be used again (RFC 9112 6.1, 6.3)."""
        codings: list[bytes] = []
        has_length = False
        for name, value in self._headers:
            lower = name.lower()
            if lower == b"transfer-encoding":
                codings.append(value)
            elif lower == b"content-length":
                has_length = True
        if self.status in (204, 304):
            self._until_close = False
        elif codings:
            self._until_close = not chunked_is_final(codings)
        else:
            self._until_close = not has_length
        if codings and (
            has_length
            or chunked_count(codings) > 1
            or self.parser.get_http_version() == "1.0"
        ):
            # Framing no sender may produce: what follows on this connection
            # may be read differently by another parser, so nothing does.
            self.reusable = False

    def _finish(self, *, complete: bool) -> None:
        if not complete:
            self.reusable = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            waiter.set_result(Response(self.status, self._headers, body))

    def _fail(self, error: Exception) -> None:
        self.reusable = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        if self.transport is not None:
            self.transport.abort()


def chunked_is_final(values: list[bytes]) -> bool:
    """Whether the Transfer-Encoding fields' values, in order, end in chunked,
    read as httptools (llhttp) frames the body: the last coding of the last
    field, spaces or tabs before it and spaces after it."""
    last = values[-1].rsplit(b",", 1)[-1]
    return last.lstrip(b" \t").rstrip(b" ").lower() == b"chunked"


def chunked_count(values: list[bytes]) -> int:
    """How many times the Transfer-Encoding fields apply chunked."""
    return sum(
        coding.strip(b" \t").lower() == b"chunked"
        for value in values
        for coding in value.split(b",")
    )
