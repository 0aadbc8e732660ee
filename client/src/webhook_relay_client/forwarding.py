"""One webhook forwarded to a local URL, and the line that reports it.

The pieces of `listen` (listen.py) that need no relay: a POST with the
webhook's headers and the exact bytes the relay signed, bounded by one
deadline, its outcome, and how that outcome reads in the terminal.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from webhook_relay_client.headers import forwardable, headers_problem
from webhook_relay_client.version import __version__

FORWARD_TIMEOUT = 10.0  # seconds, for the whole local exchange
USER_AGENT = f"webhook-relay-client/{__version__} (listen)"


@dataclass(frozen=True)
class Forwarded:
    """The local answer to one forwarded message: a status, or an error."""

    status: int | None
    error: str
    duration_ms: float

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def outcome(self) -> str:
        return str(self.status) if self.status is not None else self.error


def forward_url_check(url: str) -> str:
    """The URL, or ValueError when it is not an http(s) URL with a host."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"--forward-to must be an http:// or https:// URL, not {url!r}"
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(f"--forward-to has an unusable port: {url!r}") from None
    return url


def forward(
    url: str, headers: Mapping[str, str], body: bytes, *, timeout: float
) -> Forwarded:
    """POST body to url with the headers it may carry (headers.forwardable);
    the status (redirects are answers, not followed) or why there is none.

    `timeout` bounds the whole exchange (connect, send, the status line and
    headers), not each read: a local server that drips its answer a byte at
    a time is cut off at it, like one that never answers. The answer's body
    is not read: only its status decides."""
    started = time.monotonic()
    sent = forwardable(headers)
    problem = headers_problem(sent)
    if problem:
        return Forwarded(None, f"not sent: {problem}", 0.0)
    # Set here, not by the message: the framing is the sender's (see headers.py).
    sent["Content-Length"] = str(len(body))
    sent["User-Agent"] = USER_AGENT
    parts = urllib.parse.urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    deadline = _Deadline(timeout)
    connection_class = _BoundedHTTPS if parts.scheme == "https" else _BoundedHTTP
    connection = connection_class(parts.hostname, parts.port, deadline)
    status: int | None = None
    error = ""
    try:
        connection.request("POST", target, body=body, headers=sent)
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        error = _why(exc, timeout)
    finally:
        connection.close()
    return Forwarded(status, error, (time.monotonic() - started) * 1000)


class _Deadline:
    """One monotonic deadline for a whole exchange; each socket operation is
    given what is left of it, so no number of slow reads can outlast it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; socket.timeout (as a read past it would) when none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise socket.timeout(f"timed out after {self.seconds:g} s")
        return left

    def connect(
        self, address: tuple[str, int], timeout: object = None, source: object = None
    ) -> socket.socket:
        """socket.create_connection, with every address tried within the
        deadline (theirs gives each address the whole timeout)."""
        host, port = address
        last_error: OSError | None = None
        for family, kind, proto, _, sockaddr in socket.getaddrinfo(
            host, port, 0, socket.SOCK_STREAM
        ):
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(self.left())
                sock.connect(sockaddr)
                sock.settimeout(self.left())  # for a TLS handshake next
                return sock
            except OSError as exc:
                sock.close()
                last_error = exc
        raise last_error or OSError(f"no address for {host}")


class _DeadlineReads(io.RawIOBase):
    """A socket's reads, each waiting only what is left of the deadline."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer)


class _DeadlineSocket:
    """What http.client.HTTPResponse reads its answer from: the socket, with
    reads bounded by the deadline (HTTPResponse calls only makefile)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReads(self._sock, self._deadline))


class _BoundedHTTP(http.client.HTTPConnection):
    """An HTTPConnection whose connect, sends and answer all share one deadline."""

    def __init__(self, host: str, port: int | None, deadline: _Deadline) -> None:
        super().__init__(host, port, timeout=deadline.seconds)
        self._deadline = deadline
        self._create_connection = deadline.connect

    def send(self, data) -> None:  # type: ignore[no-untyped-def]
        # sendall's timeout bounds the whole send (Python >= 3.5).
        if self.sock is not None:
            self.sock.settimeout(self._deadline.left())
        super().send(data)

    def response_class(self, sock, *args, **kwargs):  # type: ignore[no-untyped-def]
        return http.client.HTTPResponse(
            _DeadlineSocket(sock, self._deadline), *args, **kwargs
        )


class _BoundedHTTPS(_BoundedHTTP, http.client.HTTPSConnection):
    """The same for https (the TLS handshake is bounded by the timeout the
    connected socket is given)."""


def _why(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out after {timeout:g} s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, socket.gaierror):
        return f"host not found: {exc.strerror or exc}"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "closed without an answer"
    return f"{type(exc).__name__}: {exc}"


def header(headers: Mapping[str, str], name: str) -> str:
    """A header's value, whatever the case of its name; "" when absent."""
    wanted = name.lower()
    return next((v for k, v in headers.items() if k.lower() == wanted), "")


def event_type(body: str) -> str:
    """The event's type from a webhook body; "?" when the body has none."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # not JSON; JSON nested too deep to read
        return "?"
    found = parsed.get("type") if isinstance(parsed, dict) else None
    return found if isinstance(found, str) and found else "?"


def delivery_line(
    *,
    at: datetime,
    type: str,
    event_id: str,
    attempt: int,
    outcome: str,
    duration_ms: float,
) -> str:
    """One line per forwarded message, e.g.
    `2026-12-07 23:40:01  order.created  evt_1  -> 200  12 ms`."""
    retried = f" (attempt {attempt})" if attempt > 1 else ""
    return (
        f"{at:%Y-%m-%d %H:%M:%S}  {type}  {event_id}{retried}"
        f"  -> {outcome}  {duration_ms:.0f} ms"
    )
