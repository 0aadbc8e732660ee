"""One webhook forwarded to a local URL, and the line that reports it.

The pieces of `listen` (listen.py) that need no relay: a POST with the
headers and the exact bytes the relay signed, its outcome, and how that
outcome reads in the terminal.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from webhook_relay_client.version import __version__

FORWARD_TIMEOUT = 10.0  # seconds, for the local connect and each read
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
    """POST body to url with headers; the status (redirects are answers, not
    followed) or why there is none. The answer's body is not read: only its
    status decides."""
    parts = urllib.parse.urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if parts.scheme == "https":
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout
        )
    else:
        connection = http.client.HTTPConnection(
            parts.hostname, parts.port, timeout=timeout
        )
    sent = {**headers, "User-Agent": USER_AGENT}
    started = time.monotonic()
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
    except ValueError:
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
