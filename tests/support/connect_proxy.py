"""A real HTTP CONNECT proxy on 127.0.0.1 for tests of the egress proxy
(deliveries/dispatch/tunnel.py), on an asyncio loop of its own thread.

It records every CONNECT it is asked (the authority, and the request's
headers), counts the tunnels it opened, and can be told at any time to
answer CONNECT with a status of `refuse` instead (403, 407, 502), or to
`stall` (read the request and never answer). Once a tunnel is up it copies
bytes both ways and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

REQUEST_LIMIT = 16384


class ConnectProxy:
    def __init__(self) -> None:
        self.refuse: int | None = None  # answer CONNECT with this status
        self.stall = False  # read CONNECT, never answer it
        self.connects: list[str] = []  # the authority of each CONNECT, in order
        self.headers: list[dict[str, str]] = []  # each CONNECT's headers
        self.tunnels = 0  # CONNECTs answered 200 and piped
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ConnectProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(timeout=5)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            self._server.close()  # type: ignore[union-attr]
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _serve(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await self._tunnel(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()

    async def _tunnel(self, reader, writer) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > REQUEST_LIMIT:
            return
        line, *fields = head.decode("latin-1").split("\r\n")
        method, authority, _ = line.split(" ", 2)
        headers = dict(f.split(": ", 1) for f in fields if ": " in f)
        with self._lock:
            self.connects.append(authority)
            self.headers.append(headers)
            refuse, stall = self.refuse, self.stall
        if method != "CONNECT":
            refuse = 405
        if stall:
            await asyncio.Event().wait()  # until the proxy is closed
        if refuse is not None:
            writer.write(b"HTTP/1.1 %d Refused by the test proxy\r\n" % refuse)
            writer.write(b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return
        host, _, port = authority.rpartition(":")
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                host.strip("[]"), int(port)
            )
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        with self._lock:
            self.tunnels += 1
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(
                _copy(reader, upstream_writer), _copy(upstream_reader, writer)
            )
        finally:
            upstream_writer.close()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.write_eof()
