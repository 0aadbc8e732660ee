"""One HTTP POST to a receiver -> SendResult. Writes nothing anywhere.

Persisting what happened is outcomes.py's job; keeping the two apart
lets tests drive the dispatcher with a scripted sender and lets this module be
tested against a real loopback server alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests
from urllib3.exceptions import ProtocolError, ReadTimeoutError
from urllib3.util import Timeout

from deliveries.dispatch import errors
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

    def _read_excerpt(
        self, response: requests.Response, *, deadline: float
    ) -> bytes | None:
        """Up to body_limit bytes of the body, or None if the deadline passes first.

        What lies past the limit is never read into memory.
        """
        chunks: list[bytes] = []
        size = 0
        while size < self.body_limit:
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                return None
            _body_budget(response, remaining)
            try:
                chunk = response.raw.read1(self.body_limit - size, decode_content=True)
            except (TimeoutError, ReadTimeoutError):
                return None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)[: self.body_limit]

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
            kind = errors.DNS if exc.code == errors.DNS else errors.DESTINATION_BLOCKED
            return SendResult(None, elapsed(), kind, exc.reason)
        deadline = started + self.timeout
        try:
            with self._session().post(
                request.url,
                data=request.body,
                headers=request.headers,
                # total: connect and the wait for headers share one budget.
                timeout=Timeout(total=self.timeout),
                allow_redirects=False,
                stream=True,
            ) as response:
                excerpt = self._read_excerpt(response, deadline=deadline)
                if excerpt is None:
                    return SendResult(
                        None,
                        elapsed(),
                        errors.TIMEOUT,
                        f"status {response.status_code}, but the body did not "
                        f"arrive within {self.timeout:g} s",
                    )
                return SendResult(
                    status_code=response.status_code,
                    duration_ms=elapsed(),
                    body_excerpt=excerpt.decode("utf-8", errors="replace"),
                    retry_after=response.headers.get("Retry-After"),
                )
        except (TimeoutError, ReadTimeoutError) as exc:
            return SendResult(None, elapsed(), errors.TIMEOUT, _short(exc))
        except ProtocolError as exc:
            return SendResult(None, elapsed(), errors.CONNECTION, _short(exc))
        except requests.exceptions.Timeout as exc:
            return SendResult(None, elapsed(), errors.TIMEOUT, _short(exc))
        except requests.exceptions.SSLError as exc:
            return SendResult(None, elapsed(), errors.TLS, _short(exc))
        except requests.exceptions.ConnectionError as exc:
            kind = errors.DNS if "resolve" in str(exc).lower() else errors.CONNECTION
            if isinstance(exc.__cause__, destinations.DestinationRefused):
                kind = errors.DESTINATION_BLOCKED
            return SendResult(None, elapsed(), kind, _short(exc))
        except requests.RequestException as exc:
            # requests-hardened refuses a pinned address it finds private.
            kind = (
                errors.DESTINATION_BLOCKED
                if type(exc).__name__ == "InvalidIPAddress"
                else errors.CONNECTION
            )
            return SendResult(None, elapsed(), kind, _short(exc))
        except Exception as exc:  # a receiver must never crash a dispatcher  # noqa: BLE001
            return SendResult(None, elapsed(), errors.CONNECTION, _short(exc))


def _body_budget(response: requests.Response, seconds: float) -> None:
    # Each recv waits at most what is left of the attempt, so a receiver that
    # trickles its body cannot stretch an attempt past HTTP_TIMEOUT_SECONDS.
    sock = getattr(response.raw.connection, "sock", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.001))


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]
