"""A scripted HTTP server on 127.0.0.1: it answers each request with the next
answer it was given and records what it was sent. The client's own tests need
no relay; the live ones are in the server's tree (tests/client/)."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROBLEM = "application/problem+json"


@dataclass
class Sent:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Stub:
    server: ThreadingHTTPServer
    answers: deque = field(default_factory=deque)
    sent: list[Sent] = field(default_factory=list)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, status: int, body=None, *, headers=None, raw: bytes | None = None):
        """Queue an answer: JSON (a problem+json one for a dict with "title"
        and an error status), or raw bytes."""
        headers = dict(headers or {})
        if raw is None and body is not None:
            raw = json.dumps(body).encode()
            is_problem = status >= 400 and isinstance(body, dict) and "title" in body
            headers.setdefault(
                "Content-Type", PROBLEM if is_problem else "application/json"
            )
        self.answers.append((status, headers, raw or b""))
        return self


def problem(status: int, title: str, detail: str, errors=()) -> dict:
    return {
        "type": "about:blank",  # as the relay answers (RFC 9457 default)
        "title": title,
        "status": status,
        "detail": detail,
        "errors": [{"loc": list(loc), "msg": msg} for loc, msg in errors],
    }


def _handler(stub: Stub):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            stub.sent.append(
                Sent(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
            )
            status, headers, raw = (
                stub.answers.popleft()
                if stub.answers
                else (599, {}, b"no answer queued")
            )
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve  # noqa: N815 - http.server names

        def log_message(self, *args):
            pass

    return Handler


@contextmanager
def serving() -> Iterator[Stub]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    stub = Stub(server)
    server.RequestHandlerClass = _handler(stub)
    # A short poll, so shutdown() at teardown returns at once.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Sleeps(list):
    """The sleep seam: records each wait instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
