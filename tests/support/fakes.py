"""Test doubles that are real where it matters: a real HTTP receiver on loopback,
an injectable clock, and a sender that plays back scripted results."""

from __future__ import annotations

import asyncio
import collections
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from deliveries.dispatch.transport import AsyncSender, OutgoingRequest, SendResult
from relayproject.lib.clock import utcnow


class FakeClock:
    """Wall time that moves only when told; monotonic runs on and jumps with it.

    It starts at the project clock's now (a whole second), not a fixed date:
    rows the test writes through code that reads `utcnow()` then agree with
    it on any day the suite runs. The monotonic reading keeps running (a
    dispatcher waits out its 20 ms record window and its poll interval in
    real time) and jumps forward by every advance(), so advancing the clock
    past a dispatcher's deadline makes it due at once. It counts from the
    start's epoch seconds, far from time.monotonic()'s origin: a deadline set
    on one and read on the other is never right by chance.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or utcnow().replace(microsecond=0)
        self._jumped = self._now.timestamp() - time.monotonic()
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return time.monotonic() + self._jumped

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            self._jumped += seconds
            return self._now


class ScriptedSender:
    """Answers each send with the next scripted result (or a default), and records it."""

    def __init__(self, *results: SendResult, default: SendResult | None = None) -> None:
        self.script = collections.deque(results)
        self.default = default or SendResult(status_code=200, duration_ms=5.0)
        self.requests: list[OutgoingRequest] = []
        self._lock = threading.Lock()

    def send(self, request: OutgoingRequest) -> SendResult:
        with self._lock:
            self.requests.append(request)
            return self.script.popleft() if self.script else self.default


class BlockingSender:
    """A blocking facade over AsyncSender (a real one, real sockets): sends from
    any thread run on one event loop in a thread of their own. The send loop
    runs a blocking sender on its thread pool."""

    def __init__(self, **options) -> None:
        self._options = options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sender: AsyncSender | None = None
        self._lock = threading.Lock()

    def _start(self) -> tuple[asyncio.AbstractEventLoop, AsyncSender]:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="sender-loop", daemon=True
                ).start()
                self._sender = AsyncSender(**self._options)
                self._loop = loop
            return self._loop, self._sender  # type: ignore[return-value]

    def send(self, request: OutgoingRequest) -> SendResult:
        loop, sender = self._start()
        return asyncio.run_coroutine_threadsafe(sender.send(request), loop).result()

    def close(self) -> None:
        with self._lock:
            loop, sender, self._loop = self._loop, self._sender, None
        if loop is None or sender is None:
            return
        asyncio.run_coroutine_threadsafe(sender.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5. A dispatcher opens its
    # connections in a burst (64 at once in the fairness tests), so the
    # kernel dropped the handshakes past the sixth and the sends waited out
    # SYN retransmits (1, 3, 7 s) or timed out: flaky tests about the relay
    # that were really about this fake. A real receiver listens with
    # somaxconn's backlog.
    request_queue_size = 1024
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # The dispatcher hanging up on a reply it gave up on (a timeout, a
        # cut body) is what many tests do on purpose: not worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Receiver:
    """A real HTTP server on 127.0.0.1 that records every POST it gets.

    `respond` decides each reply from the request (default: 200 "ok").
    """

    def __init__(self, respond: Callable[[Received], Reply] | None = None) -> None:
        self.respond = respond or (lambda _r: Reply())
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                item = Received(
                    self.path, dict(self.headers.items()), self.rfile.read(length)
                )
                reply = receiver.respond(item)
                with receiver._arrived:
                    receiver.received.append(item)
                    receiver._arrived.notify_all()
                if reply.delay:
                    time.sleep(
                        reply.delay
                    )  # simulating a slow receiver, not synchronising
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *args) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.received) >= count, timeout=timeout)
            return list(self.received)
