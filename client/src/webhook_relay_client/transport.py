"""One HTTP exchange, and when to try it again.

`urllib_transport` is the default seam: it sends one request and returns the
answer, following no redirect (urllib's own handler would carry the
Authorization header to wherever a 3xx points). Tests and callers with their
own HTTP stack pass any callable of the same shape to `Client(transport=)`.
"""

from __future__ import annotations

import email.utils
import http.client
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from webhook_relay_client.errors import TransportError

# An answer larger than this is refused rather than held in memory: the
# API's largest (a page of 200 deliveries) is far smaller.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
# The statuses that say "later": the request was not acted on (contract:
# a request that fails writes nothing), so it may be sent again.
RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # names lower-cased
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


Transport = Callable[[str, str, Mapping[str, str], "bytes | None", float], Answer]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx reaches the caller as an answer


_OPENER = urllib.request.build_opener(_NoRedirects)


def urllib_transport(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | None,
    timeout: float,
) -> Answer:
    """Send one request with the standard library; raise TransportError when
    there is no answer. `timeout` bounds the connect and each read."""
    request = urllib.request.Request(
        url, data=body, headers=dict(headers), method=method
    )
    try:
        try:
            response = _OPENER.open(request, timeout=timeout)
        except urllib.error.HTTPError as error:
            response = error  # an error status is still an answer
        with response:
            return _answer(response.status, response.headers, response)
    except (OSError, http.client.HTTPException) as exc:
        # URLError is an OSError; a timeout is too; a reset mid-answer is either.
        reason = getattr(exc, "reason", None) or exc
        raise TransportError(f"{method} {url}: no answer ({reason})") from exc


def _answer(status: int, headers, stream) -> Answer:
    body = stream.read(MAX_ANSWER_BYTES + 1)
    if len(body) > MAX_ANSWER_BYTES:
        raise TransportError(f"answer larger than {MAX_ANSWER_BYTES} bytes, refused")
    return Answer(
        status=status,
        headers={name.lower(): value for name, value in headers.items()},
        body=body,
    )


def retry_after_seconds(value: str, *, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After value: delay-seconds or an HTTP-date
    (RFC 9110 10.2.3); a date in the past is 0. None when absent or unreadable."""
    value = value.strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)  # an HTTP-date is in GMT
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait on 429 and 503.

    `max_retries` more tries after the first; each waits what Retry-After
    says, clamped to [0, max_wait], or without it `backoff * 2**n` seconds
    (also clamped)."""

    max_retries: int = 3
    max_wait: float = 30.0
    backoff: float = 0.5

    def wait(self, retry: int, retry_after: float | None) -> float:
        wanted = self.backoff * 2**retry if retry_after is None else retry_after
        return min(max(wanted, 0.0), self.max_wait)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
