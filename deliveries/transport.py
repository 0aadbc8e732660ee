"""One HTTP POST to a receiver -> SendResult. Writes nothing anywhere.

Persisting what happened is deliveries.outcomes' job; keeping the two apart
lets tests drive the dispatcher with a scripted sender and lets this module be
tested against a real loopback server alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from deliveries import retry
from endpoints import destinations

VERSION = "1.0"
USER_AGENT = f"webhook-relay/{VERSION}"


@dataclass(frozen=True)
class OutgoingRequest:
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class SendResult:
    status_code: int | None
    duration_ms: float
    error_kind: str = ""
    error_message: str = ""
    body_excerpt: str = ""
    retry_after: str | None = None


class Sender:
    """Sends with one requests.Session per thread (sessions are not thread-safe)."""

    def __init__(
        self,
        *,
        timeout: float,
        body_limit: int,
        allow_private: bool,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.body_limit = body_limit
        self.allow_private = allow_private
        self.monotonic = monotonic
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = destinations.build_session(
                allow_private=self.allow_private, user_agent=USER_AGENT
            )
            self._local.session = session
        return session

    def send(self, request: OutgoingRequest) -> SendResult:
        started = self.monotonic()

        def elapsed() -> float:
            return (self.monotonic() - started) * 1000

        try:
            # Checked again at send time: DNS may have changed since the
            # endpoint was saved. The session then pins the address it checks.
            destinations.check_url(request.url, allow_private=self.allow_private)
        except destinations.DestinationRefused as exc:
            # A name that does not resolve right now is a DNS error (retried);
            # anything else the policy refuses is permanent.
            kind = retry.DNS if exc.code == retry.DNS else retry.DESTINATION_BLOCKED
            return SendResult(None, elapsed(), kind, exc.reason)
        try:
            with self._session().post(
                request.url,
                data=request.body,
                headers=request.headers,
                timeout=self.timeout,
                allow_redirects=False,
                stream=True,
            ) as response:
                # Read at most the limit: a huge or endless body never fills memory.
                raw = response.raw.read(self.body_limit, decode_content=True) or b""
                return SendResult(
                    status_code=response.status_code,
                    duration_ms=elapsed(),
                    body_excerpt=raw.decode("utf-8", errors="replace"),
                    retry_after=response.headers.get("Retry-After"),
                )
        except requests.exceptions.Timeout as exc:
            return SendResult(None, elapsed(), retry.TIMEOUT, _short(exc))
        except requests.exceptions.SSLError as exc:
            return SendResult(None, elapsed(), retry.TLS, _short(exc))
        except requests.exceptions.ConnectionError as exc:
            kind = retry.DNS if "resolve" in str(exc).lower() else retry.CONNECTION
            if isinstance(exc.__cause__, destinations.DestinationRefused):
                kind = retry.DESTINATION_BLOCKED
            return SendResult(None, elapsed(), kind, _short(exc))
        except requests.RequestException as exc:
            # requests-hardened refuses a pinned address it finds private.
            kind = (
                retry.DESTINATION_BLOCKED
                if type(exc).__name__ == "InvalidIPAddress"
                else retry.CONNECTION
            )
            return SendResult(None, elapsed(), kind, _short(exc))
        except Exception as exc:  # a receiver must never crash a dispatcher  # noqa: BLE001
            return SendResult(None, elapsed(), retry.CONNECTION, _short(exc))


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]
