"""A local receiver on 127.0.0.1 at the byte level, for what http.server
would hide: every byte a forwarded POST put on the wire (a second request
smuggled after the first included), and an answer dripped a byte at a time."""

from __future__ import annotations

import socket
import threading
import time

ACCEPT_SECONDS = 5.0  # a test whose client never connects fails, not hangs


class RawReceiver:
    """Serves one connection: answers `reply` once a request's head is in
    (or drips `drip`, a byte each `drip_every` seconds), then records all it
    was sent until the client closes."""

    def __init__(
        self, reply: bytes = b"", *, drip: bytes = b"", drip_every: float = 0.05
    ) -> None:
        self.reply = reply
        self.drip = drip
        self.drip_every = drip_every
        self.received = b""
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1)
        self._listener.settimeout(ACCEPT_SECONDS)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._listener.close()
        self._thread.join(timeout=ACCEPT_SECONDS)

    def all_received(self) -> bytes:
        """Everything sent on the connection, once the client has closed it."""
        self._thread.join(timeout=ACCEPT_SECONDS)
        assert not self._thread.is_alive(), "the client never closed"
        return self.received

    def _serve(self) -> None:
        try:
            connection, _ = self._listener.accept()
        except OSError:
            return
        with connection:
            connection.settimeout(ACCEPT_SECONDS)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                connection.sendall(self.reply)
                self._drip(connection)
                while True:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass  # the client gave up on us: what it sent is recorded
            self.received = data

    def _drip(self, connection: socket.socket) -> None:
        for byte in self.drip:
            connection.sendall(bytes([byte]))
            time.sleep(self.drip_every)  # the pace of a slow server, not a wait


def request_parts(raw: bytes) -> tuple[str, dict[str, list[str]], bytes]:
    """A request's line, its headers (lower-cased names, every value), and
    all the bytes after its head."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for field in fields:
        name, _, value = field.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return line, headers, rest
