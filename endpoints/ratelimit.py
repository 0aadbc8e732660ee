"""Per-endpoint token bucket, pure arithmetic (contract section 6).

The shared database version (one atomic UPDATE across dispatchers,
endpoints/health.py's ``endpoint_rate_take``) mirrors ``refill`` and ``take``
exactly; change both together.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    tokens: float
    updated_at: float  # unix seconds


def capacity(rate: float) -> float:
    """Return the bucket size: ``max(1, rate)``, so a rate below 1/s still
    lets one send through whenever a whole token has accrued.
    """
    return max(1.0, rate)


def refill(tokens: float, updated_at: float, *, rate: float, now: float) -> float:
    """Return the tokens at ``now``: ``tokens + elapsed * rate``, capped at
    ``capacity(rate)``. Raises ``ValueError`` unless ``rate`` > 0.
    """
    if rate <= 0:
        # "No limit" is the caller's None; a zero rate would wait forever.
        raise ValueError("rate must be positive")
    # Clocks on different dispatcher hosts disagree slightly; a reading from
    # the past must not take tokens away.
    elapsed = max(0.0, now - updated_at)
    return min(capacity(rate), tokens + elapsed * rate)


def take(
    bucket: Bucket, *, rate_per_second: float, now: float
) -> tuple[bool, Bucket, float]:
    """Take one token if available.

    Returns ``(granted, new_bucket, wait_seconds)``; ``wait_seconds`` is 0 when
    granted, else the time until a whole token has accrued.
    """
    tokens = refill(bucket.tokens, bucket.updated_at, rate=rate_per_second, now=now)
    # Never move updated_at backwards: the elapsed time up to the later
    # reading has already been credited, and would be credited twice.
    updated_at = max(bucket.updated_at, now)
    if tokens >= 1.0:
        return True, Bucket(tokens=tokens - 1.0, updated_at=updated_at), 0.0
    wait = (1.0 - tokens) / rate_per_second
    return False, Bucket(tokens=tokens, updated_at=updated_at), wait
