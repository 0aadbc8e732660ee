"""How long a claim is held by default, and why it stays bounded.

A claimed job may wait in the dispatcher's queue before it is sent, so the
lease covers the wait and the send:

- the queue holds at most about a batch of sendable jobs ahead of it, sent
  `concurrency` at a time, each wave taking at most HTTP_TIMEOUT_SECONDS:
  ceil(batch / concurrency) timeouts, plus one for its own send;
- and a margin for recording, a slow database, a pause;
- and at least two of the longest timeout an endpoint may ask for
  (HTTP_TIMEOUT_MAX_SECONDS, endpoints/retry_policy.py) and the margin, so a
  job of such an endpoint has time to be sent whole, and start_margin(),
  reckoned with that timeout, never holds one back for good.

It used to add BREAKER_FAILURE_THRESHOLD timeouts too (a failing endpoint is
sent one request at a time until its breaker opens), so a threshold of
100,000 made a lease of 11 days, and a crash held its rows that long when no
heartbeat could speak for it. That wait is no longer the lease's to cover: a
job whose lease could run out before its send ends goes back pending,
unspent, instead of being sent (sendloop.py, `start_margin`), so a queue
that waits longer costs a re-claim, never a duplicate. For the same reason
the default is capped at MAX_DEFAULT_SECONDS (or two timeouts and the
margin, if that is longer): a lease only matters once its dispatcher is gone,
and then a shorter one is better.

A dead dispatcher's rows do not wait for the lease at all when another
dispatcher runs: its heartbeat stops and it is declared dead after
DISPATCHER_DEAD_AFTER_SECONDS (rescue.py). The lease is the backstop.

CLAIM_LEASE_SECONDS or --lease-seconds replace the whole sum.
"""

from __future__ import annotations

import math

MARGIN_SECONDS = 60.0
MAX_DEFAULT_SECONDS = 600.0


def default_lease_seconds(
    *,
    batch_size: int,
    concurrency: int,
    timeout: float,
    longest: float | None = None,
    margin: float = MARGIN_SECONDS,
) -> float:
    """max((ceil(batch / concurrency) + 1) x timeout, 2 x longest) + margin,
    at most max(MAX_DEFAULT_SECONDS, 2 x longest + margin); `longest` is the
    longest per-attempt timeout an endpoint may have (the timeout when none)."""
    longest = max(timeout, longest or 0.0)
    waves = math.ceil(max(1, batch_size) / max(1, concurrency)) + 1
    cap = max(MAX_DEFAULT_SECONDS, 2 * longest + margin)
    return min(max(waves * timeout, 2 * longest) + margin, cap)


def start_margin(*, lease_seconds: float, timeout: float, grace: float) -> float | None:
    """How much lease a queued job must have left to be sent (else it goes back).

    A send lasts at most timeout + grace. A lease too short to hold two of
    those (one set on purpose, as tests do) keeps the old rule: whatever is
    held is sent.
    """
    need = timeout + grace
    return need if lease_seconds >= 2 * need else None
