"""What an attempt's outcome means, and how long to wait before the next one.

Pure: no database, no clock, no global random state (contract section 5). The
caller decides "attempts exhausted -> dead"; this module only classifies.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum

from deliveries.models import ErrorKind
from endpoints.retry_policy import scheduled_wait

# Only these carry a Retry-After we honour (contract section 5).
RETRY_AFTER_STATUSES = frozenset({429, 503})
# Longest Retry-After taken at face value (about 31 years); a longer one, of any
# number of digits, counts as this much and is then clamped like any other.
RETRY_AFTER_CEILING_SECONDS = 10**9
# An HTTP-date is under 40 characters; parsing a receiver's megabyte is pointless.
HTTP_DATE_MAX_CHARS = 100


class Verdict(StrEnum):
    SUCCEEDED = "succeeded"
    RETRY = "retry"
    DEAD = "dead"
    GONE = "gone"  # 410: dead, and the endpoint is disabled


def is_success(status_code: int | None) -> bool:
    """A 2xx answer: the one meaning of "delivered" (contract section 5)."""
    return status_code is not None and 200 <= status_code < 300


def is_delivered(status_code: int | None, *, acknowledged: bool = False) -> bool:
    """A 2xx answer, or a broker's acknowledgement (a broker destination's
    success has no HTTP status: deliveries/dispatch/brokers/)."""
    return acknowledged or is_success(status_code)


def classify(
    *,
    status_code: int | None,
    error_kind: str | None,
    permanent: frozenset[int] | set[int] = frozenset(),
    acknowledged: bool = False,
) -> Verdict:
    """Map one attempt's outcome to a verdict (contract section 5).

    Every answer that is not 2xx is retried, 4xx included: a receiver that
    answers 401 for ten minutes during a bad deploy must not lose everything
    to dead letters. Only 410 and the statuses in ``permanent`` (the
    endpoint's permanent_statuses with PERMANENT_FAILURE_STATUSES) stop at once.
    Anything unrecognised is retried, since the attempt budget bounds a retry
    but a wrong "dead" loses the event.
    """
    if acknowledged and not error_kind:
        return Verdict.SUCCEEDED
    if status_code is not None:
        if is_success(status_code):
            return Verdict.SUCCEEDED
        if status_code == 410:
            return Verdict.GONE
        if status_code in permanent:
            return Verdict.DEAD
        # 1xx, 3xx (redirects are never followed), 4xx, 5xx, out-of-range codes.
        return Verdict.RETRY
    if error_kind == ErrorKind.DESTINATION_BLOCKED:
        # Resending cannot help until someone changes the endpoint URL.
        return Verdict.DEAD
    # timeout, connection, DNS, TLS, lease_expired, and unknown kinds.
    return Verdict.RETRY


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Return the Retry-After delay in seconds (>= 0), or None if unusable.

    Accepts delay-seconds or an HTTP-date; ``now`` must be timezone-aware. A
    receiver writes this header: any length or shape returns a number or None,
    never an exception (int() of 5,000 digits raises, float() of 400 overflows).
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    # isascii() first: str.isdigit() also accepts digits such as "²".
    if value.isascii() and value.isdigit():
        digits = value.lstrip("0") or "0"
        if len(digits) > len(str(RETRY_AFTER_CEILING_SECONDS)):
            return float(RETRY_AFTER_CEILING_SECONDS)
        return float(min(int(digits), RETRY_AFTER_CEILING_SECONDS))
    if len(value) > HTTP_DATE_MAX_CHARS:
        return None
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            # "-0000" yields a naive datetime; HTTP-dates are always GMT.
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - now).total_seconds())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def backoff_seconds(
    *, failed_attempts: int, base: float, max_delay: float, rand: random.Random
) -> float:
    """Return a full-jitter delay: uniform(0, min(max_delay, base * 2**n))."""
    if failed_attempts < 0:
        raise ValueError("failed_attempts must be >= 0")
    try:
        raw = base * 2.0**failed_attempts
    except OverflowError:
        # 2.0**n overflows past n ~ 1023; the cap is max_delay long before.
        raw = max_delay
    return rand.uniform(0.0, min(max_delay, raw))


def next_delay(
    *,
    failed_attempts: int,
    status_code: int | None,
    retry_after_header: str | None,
    base: float,
    max_delay: float,
    rand: random.Random,
    now: datetime,
    schedule: Sequence[float] | None = None,
) -> float:
    """Return seconds until the next attempt: Retry-After on 429/503 when it
    parses (clamped to ``max_delay``), else the endpoint's ``schedule`` when
    it has one (exactly, no jitter: contract section 9), else full-jitter
    backoff.
    """
    if status_code in RETRY_AFTER_STATUSES:
        retry_after = parse_retry_after(retry_after_header, now=now)
        if retry_after is not None:
            return min(retry_after, max_delay)
    if schedule:
        return scheduled_wait(schedule, failed_attempts)
    return backoff_seconds(
        failed_attempts=failed_attempts, base=base, max_delay=max_delay, rand=rand
    )
