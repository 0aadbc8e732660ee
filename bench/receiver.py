"""A loopback webhook receiver for the benchmark, run as its own process.

It answers every POST 200 at once (or after --delay seconds) on keep-alive
HTTP/1.1 connections, one thread per connection, and records the wall-clock
receipt time of each (path, webhook-id). The bench reads the record with
GET /_dump and clears it with POST /_reset. Standard library only, so it
adds no dependency and costs the same for the relay and the ceiling.

    python bench/receiver.py --port 0 --delay 0.1   # prints "port N" first
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = b"ok"


def serve(*, port: int, delay: float) -> None:
    received: list[tuple[str, str, float]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Without this, headers and body leave in two small segments and
        # Nagle holds the second until the client's delayed ACK: 40 ms a request.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if self.path == "/_reset":
                with lock:
                    received.clear()
                self._reply(b"{}")
                return
            # Receipt is when the request has fully arrived, before any delay.
            item = (self.path, self.headers.get("webhook-id", ""), time.time())
            with lock:
                received.append(item)
            if delay:
                time.sleep(delay)  # the slow receiver under test, not a wait
            self._reply(REPLY)

        def do_GET(self) -> None:  # noqa: N802
            with lock:
                body = json.dumps(received).encode()
            self._reply(body)

        def _reply(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"port {server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    serve(port=args.port, delay=args.delay)


if __name__ == "__main__":
    sys.exit(main())
