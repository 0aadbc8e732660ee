"""A loopback TCP proxy that can play a database restart to its clients.

The PostgreSQL server here is shared, so it is never restarted for a test:
the proxy drops every connection through it and turns new ones away instead,
which is what a restart looks like from the client's side.
"""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.accepted = 0
        self.refused = 0
        self._open = True
        self._lock = threading.Lock()
        self._refusal = threading.Condition(self._lock)
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc) -> None:
        self._close(self._listener)
        self.cut()

    def cut(self) -> None:
        """Drop every proxied connection and refuse new ones until resume()."""
        with self._lock:
            self._open = False
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            self._close(sock)

    def resume(self) -> None:
        with self._lock:
            self._open = True

    def wait_for_refusals(self, count: int, timeout: float) -> bool:
        with self._refusal:
            return self._refusal.wait_for(lambda: self.refused >= count, timeout)

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if not self._open:
                    # Accepted and closed at once: the client sees the server go.
                    self.refused += 1
                    self._refusal.notify_all()
                    self._close(client)
                    continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                self._close(client)
                continue
            with self._lock:
                self.accepted += 1
                self._sockets |= {client, server}
            for src, dst in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump, args=(src, dst), daemon=True
                ).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with self._lock:
                    self._sockets.discard(sock)
                self._close(sock)

    @staticmethod
    def _close(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
