"""A real HTTPS receiver on 127.0.0.1 that asks for a client certificate
(mTLS), for tests of deliveries/dispatch/client_tls.py.

Blocking sockets on threads, as most TLS servers are written: OpenSSL sends
its alert (certificate_required, unknown_ca, certificate_expired) before the
handshake's failure closes the socket. Under TLS 1.3 the client has sent
its request by then, and a close with it unread is a reset that can discard
the alert before the client reads it, as with real servers; `graceful` ends
the write side and reads until the client closes instead, so the alert
always arrives. It answers each request 200 "ok" on a
keep-alive connection and records, per request, which connection carried it
and the common name of the client certificate that connection presented.
"""

from __future__ import annotations

import socket
import socketserver
import ssl
import threading
from dataclasses import dataclass

import trustme

HEAD_LIMIT = 16384
CLOSE_WAIT_SECONDS = 5.0  # a graceful refusal waits this long for the client


@dataclass(frozen=True)
class Seen:
    connection: int  # numbered in the order the handshakes completed
    client: str  # the client certificate's common name, "" without one


class MtlsReceiver:
    """`server_cert` is what it presents; it trusts `client_ca` for client
    certificates, requires one unless `require` is False, and closes a
    connection whose certificate's common name is in `close_for` without
    answering or sending an alert (a gateway's own check after the
    handshake). `maximum_version` caps the TLS version it speaks."""

    def __init__(
        self,
        *,
        server_cert: trustme.LeafCert,
        client_ca: trustme.CA,
        require: bool = True,
        close_for: frozenset[str] = frozenset(),
        maximum_version: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED,
        graceful: bool = False,
    ) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_cert.configure_cert(context)
        client_ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED if require else ssl.CERT_OPTIONAL
        context.maximum_version = maximum_version
        self.context = context
        self.close_for = close_for
        self.graceful = graceful
        self.seen: list[Seen] = []
        self.handshake_errors: list[str] = []
        self._lock = threading.Lock()
        self._connections = 0
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}
        )

    def url(self, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}/hook"

    def __enter__(self) -> MtlsReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _serve(self, raw) -> None:
        tls = self.context.wrap_socket(
            raw, server_side=True, do_handshake_on_connect=False
        )
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            with self._lock:
                self.handshake_errors.append(getattr(exc, "reason", "") or str(exc))
            if self.graceful:
                _read_to_close(tls)
            tls.close()
            return
        with self._lock:
            self._connections += 1
            number = self._connections
        client = _common_name(tls.getpeercert())
        if client in self.close_for:
            tls.close()
            return
        with tls, tls.makefile("rb") as reader:
            while _read_request(reader):
                with self._lock:
                    self.seen.append(Seen(number, client))
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False


def _handler_for(receiver: MtlsReceiver) -> type[socketserver.BaseRequestHandler]:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            receiver._serve(self.request)

    return Handler


def _read_to_close(tls: ssl.SSLSocket) -> None:
    """Ends the write side (the alert is sent, then a FIN) and reads what the
    client sent until it closes, bounded by a deadline."""
    try:
        tls.shutdown(socket.SHUT_WR)  # drops the failed TLS state; raw bytes now
        tls.settimeout(CLOSE_WAIT_SECONDS)
        while tls.recv(65536):
            pass
    except OSError:
        pass


def _read_request(reader) -> bool:
    """Reads one request (head and Content-Length body); False at the close."""
    length = 0
    size = 0
    while True:
        try:
            line = reader.readline(HEAD_LIMIT)
        except (OSError, ssl.SSLError):
            return False
        if not line:
            return False
        size += len(line)
        if size > HEAD_LIMIT:
            return False
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return len(reader.read(length)) == length


def _common_name(peer: dict | None) -> str:
    for rdn in (peer or {}).get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return value
    return ""
