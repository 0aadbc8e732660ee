"""Per-endpoint circuit breaker as a pure state machine (contract section 6).

Each function takes a ``Breaker`` and returns a new one: this module says
what the next state is and touches no database. endpoints/health.py reads
the health row, asks these rules and writes the answer; endpoints/probes.py
makes "exactly one probe" hold across dispatchers (its conditional UPDATEs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

SLOW_P95_MS = 2000
VERY_SLOW_P95_MS = 5000
MIN_SAMPLES = 20  # fewer samples say too little about latency to act on


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Breaker:
    state: str
    consecutive_failures: int
    cooldown_seconds: float
    opened_at: datetime | None
    next_probe_at: datetime | None
    reason: str = ""


def after_success(b: Breaker, *, now: datetime, base_cooldown: float) -> Breaker:
    """Return a closed breaker with the counter and cooldown reset.

    Any success counts, including a late one while open: the endpoint answers.
    ``now`` is unused and kept so every transition has the same shape.
    """
    return replace(
        b,
        state=BreakerState.CLOSED,
        consecutive_failures=0,
        cooldown_seconds=base_cooldown,
        opened_at=None,
        next_probe_at=None,
        reason="",
    )


def after_failure(
    b: Breaker,
    *,
    now: datetime,
    threshold: int,
    base_cooldown: float,
    max_cooldown: float,
    error: str,
) -> Breaker:
    """Return the breaker after one failed attempt.

    closed: count, open at ``threshold``; half_open (probe failed): reopen with
    the cooldown doubled up to ``max_cooldown``; open (late result): count only.
    """
    failures = b.consecutive_failures + 1
    if b.state == BreakerState.CLOSED:
        if failures < threshold:
            return replace(b, consecutive_failures=failures)
        return replace(
            b,
            state=BreakerState.OPEN,
            consecutive_failures=failures,
            cooldown_seconds=base_cooldown,
            opened_at=now,
            next_probe_at=now + timedelta(seconds=base_cooldown),
            reason=f"opened after {failures} consecutive failures (last: {error})",
        )
    if b.state == BreakerState.HALF_OPEN:
        # max() with base: a stored cooldown of 0 would otherwise double to 0
        # and probe in a tight loop.
        cooldown = min(max_cooldown, max(base_cooldown, b.cooldown_seconds * 2))
        return replace(
            b,
            state=BreakerState.OPEN,
            consecutive_failures=failures,
            cooldown_seconds=cooldown,
            opened_at=now,
            next_probe_at=now + timedelta(seconds=cooldown),
            reason=f"probe failed, reopened for {cooldown:g}s (last: {error})",
        )
    if b.state == BreakerState.OPEN:
        # A send already in flight when the breaker opened; its failure says
        # nothing new about when to probe.
        return replace(b, consecutive_failures=failures)
    raise ValueError(f"unknown breaker state {b.state!r}")


def start_probe(b: Breaker, *, now: datetime) -> Breaker | None:
    """Return the half-open breaker if an open one's cooldown is over, else None.

    The caller must persist it conditionally so only one dispatcher wins.
    """
    if b.state != BreakerState.OPEN:
        return None
    # An open row with no probe time would otherwise stay open forever.
    if b.next_probe_at is not None and now < b.next_probe_at:
        return None
    return replace(b, state=BreakerState.HALF_OPEN)


def allows_send(b: Breaker, *, now: datetime) -> bool:
    """Return True only when closed; a half-open breaker sends just the probe
    granted by ``start_probe``, which the caller tracks.
    """
    return b.state == BreakerState.CLOSED


def is_slow(*, p95_ms: float | None, samples: int) -> bool:
    """Return True when 24 h p95 latency exceeds 2000 ms over >= 20 samples."""
    return p95_ms is not None and samples >= MIN_SAMPLES and p95_ms > SLOW_P95_MS


def effective_threshold(
    *, base_threshold: int, p95_ms: float | None, samples: int
) -> int:
    """Return the failure threshold, halved (at least 1) for a very slow
    endpoint: p95 over 5000 ms with >= 20 samples.
    """
    if p95_ms is not None and samples >= MIN_SAMPLES and p95_ms > VERY_SLOW_P95_MS:
        return max(1, base_threshold // 2)
    return base_threshold
