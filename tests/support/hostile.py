"""Receivers that misbehave on purpose: a real asyncio server on 127.0.0.1.

A merchant controls its receiver, so each behaviour here is something a
hostile or broken one can do to a dispatcher. The server reads each request
(head and Content-Length body), records it, then lets the behaviour named by
the request's path write whatever bytes it likes. Trickles sleep between
bytes: that is the receiver being slow on purpose, not a test synchronising.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Writer = asyncio.StreamWriter
Behaviour = Callable[[Writer], Awaitable[None]]

TRICKLE_SECONDS = 0.1  # between two bytes of a trickle; it never ends by itself


def head(status: str = "200 OK", *headers: str, length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def reply(data: bytes) -> Behaviour:
    async def behave(writer: Writer) -> None:
        writer.write(data)
        await writer.drain()

    return behave


def answer(status: str, body: bytes = b"", *headers: str) -> Behaviour:
    return reply(head(status, *headers, length=len(body)) + body)


def raw_answer(status: str, body: bytes, *headers: bytes) -> Behaviour:
    """Headers given as bytes, so they may hold anything (non-UTF-8 included)."""
    lines = [f"HTTP/1.1 {status}".encode(), *headers, b"Content-Length: %d" % len(body)]
    return reply(b"\r\n".join(lines) + b"\r\n\r\n" + body)


def trickle(prefix: bytes, forever: bytes) -> Behaviour:
    """Write prefix, then forever, one byte at a time, over and over."""

    async def behave(writer: Writer) -> None:
        writer.write(prefix)
        await writer.drain()
        while True:
            for byte in forever:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(TRICKLE_SECONDS)

    return behave


def close_after(data: bytes) -> Behaviour:
    """Write data, then close the connection cleanly (FIN)."""

    async def behave(writer: Writer) -> None:
        writer.write(data)
        await writer.drain()
        writer.close()

    return behave


def reset_after(data: bytes) -> Behaviour:
    """Write data, then reset the connection (RST, not a clean close)."""

    async def behave(writer: Writer) -> None:
        writer.write(data)
        await writer.drain()
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    return behave


async def hang_up(writer: Writer) -> None:
    """Close the connection cleanly (FIN) without a byte of an answer."""
    writer.close()
    await writer.wait_closed()


def gzip_bomb(inflated_bytes: int = 50_000_000) -> bytes:
    """A small gzip body that inflates to inflated_bytes of zeros."""
    return gzip.compress(b"\0" * inflated_bytes, compresslevel=9)


GZIP_BOMB = gzip_bomb()
# Brotli is never decoded either; random bytes labelled br stand in for a bomb
# (aiohttp would need the brotli package to decode, and must not try anyway).
BROTLI_BODY = os.urandom(20_000)


@dataclass(frozen=True)
class Case:
    """A hostile behaviour and how the attempt it causes must be recorded."""

    name: str
    behave: Behaviour
    status: int | None
    error_kind: str  # "" for a 2xx; http_status is what outcomes store for others


HTTP_STATUS = "http_status"

CASES = [
    Case(
        "retry-after-400-digits",
        answer("503 Busy", b"", "Retry-After: 1" + "0" * 400),
        503,
        HTTP_STATUS,
    ),
    Case(
        "retry-after-5000-digits",
        answer("503 Busy", b"", "Retry-After: " + "9" * 5000),
        503,
        HTTP_STATUS,
    ),
    Case(
        "retry-after-garbage",
        raw_answer("429 Slow down", b"", b"Retry-After: 1e999, \xff\xfe soon; -1"),
        429,
        HTTP_STATUS,
    ),
    Case(
        "nul-body",
        answer("500 Oops", b"before\x00\x00after \xff\xfe\xed\xa0\x80 end"),
        500,
        HTTP_STATUS,
    ),
    # Three digits, but no HTTP status (100-599): not stored as one.
    Case("status-999", answer("999 Whatever", b"odd"), None, "invalid_response"),
    Case("status-000", answer("000 Nothing", b"odd"), None, "invalid_response"),
    Case(
        # chunked is not the final coding: the body runs to the close (RFC
        # 9112 6.3), and the 200 is a success, not a connection error retried.
        "chunked-not-final",
        close_after(head("200 OK", "Transfer-Encoding: chunked, gzip") + b"gz"),
        200,
        "",
    ),
    Case(
        "gzip-bomb",
        answer("200 OK", GZIP_BOMB, "Content-Encoding: gzip"),
        200,
        "",
    ),
    Case(
        "brotli-body",
        answer("200 OK", BROTLI_BODY, "Content-Encoding: br"),
        200,
        "",
    ),
    Case("trickled-status-line", trickle(b"", b"HTTP/1.1 200 OK"), None, "timeout"),
    Case(
        "trickled-headers",
        trickle(b"HTTP/1.1 200 OK\r\n", b"X-Slow: abcdefghij\r\n"),
        None,
        "timeout",
    ),
    Case(
        "trickled-body",
        trickle(head("200 OK", length=10_000), b"x"),
        None,
        "timeout",
    ),
    Case(
        "ten-thousand-headers",
        reply(
            b"HTTP/1.1 200 OK\r\n"
            + b"".join(b"X-H%d: v\r\n" % n for n in range(10_000))
            + b"Content-Length: 0\r\n\r\n"
        ),
        None,
        "invalid_response",
    ),
    Case(
        "huge-header",
        answer("200 OK", b"", "X-Huge: " + "h" * 200_000),
        None,
        "invalid_response",
    ),
    Case(
        "nul-in-a-header",
        raw_answer("200 OK", b"", b"X-Bad: a\x00b"),
        None,
        "invalid_response",
    ),
    Case(
        "garbage-status-line",
        reply(b"HELLO THERE\r\n\r\n"),
        None,
        "invalid_response",
    ),
    Case(
        "reset-mid-body",
        # Fewer bytes than any body limit: the attempt needed more than it got.
        reset_after(head("200 OK", length=10_000) + b"y" * 10),
        None,
        "connection_error",
    ),
    Case(
        "reset-mid-headers",
        reset_after(b"HTTP/1.1 200 OK\r\nX-Half: a"),
        None,
        "connection_error",
    ),
    Case(
        "closed-without-answering",
        hang_up,
        None,
        "connection_error",
    ),
    Case(
        "reset-before-answering",
        reset_after(b""),
        None,
        "connection_error",
    ),
]
CASES_BY_NAME = {case.name: case for case in CASES}
OK = answer("200 OK", b"ok")


class HostileReceiver:
    """An asyncio HTTP/1.1 server on its own thread; the path picks the behaviour.

    ``/<case name>`` plays that case; ``/ok`` (and anything unknown) answers
    200 "ok". ``received`` lists the paths of the requests read so far.
    """

    def __init__(self, extra: dict[str, Behaviour] | None = None) -> None:
        self.behaviours: dict[str, Behaviour] = {c.name: c.behave for c in CASES}
        self.behaviours.update(extra or {})
        self.received: list[str] = []
        self.connections = 0
        self.headers: list[dict[str, str]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self.port = 0

    def url(self, name: str = "ok") -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> HostileReceiver:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result()
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        # A connection accepted just before the server closed starts its
        # handler after the sweep above: end those here, with the loop still
        # open, or the garbage collector closes them later, in another test,
        # and their writer.close() finds the loop closed.
        left = asyncio.all_tasks(self._loop)
        for task in left:
            task.cancel()
        if left:
            self._loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        self._loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            while True:  # keep-alive: one request after another
                try:
                    request_head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = request_head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = dict(
                    line.split(": ", 1) for line in lines[1:] if ": " in line
                )
                length = int(headers.get("Content-Length", "0"))
                await reader.readexactly(length)
                self.received.append(path)
                self.headers.append(headers)
                behaviour = self.behaviours.get(path.lstrip("/"), OK)
                # The connection stays open after any answer, as a server's
                # would; one that breaks the protocol is closed by the client.
                await behaviour(writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
