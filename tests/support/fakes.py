"""Test doubles that are real where it matters: a real HTTP receiver on loopback,
an injectable clock, and a sender that plays back scripted results."""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from deliveries.dispatch.transport import OutgoingRequest, SendResult
from relayproject.lib.clock import utcnow


class FakeClock:
    """Wall time that moves only when told; monotonic follows it.

    It starts at the project clock's now (a whole second), not a fixed date:
    rows the test writes through code that reads `utcnow()` then agree with
    it on any day the suite runs.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or utcnow().replace(microsecond=0)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.now().timestamp()

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
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
