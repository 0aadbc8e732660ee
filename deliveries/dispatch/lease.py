"""How long a claim is held by default: long enough that a healthy dispatcher
never loses a lease, whatever its receivers do.

A claimed job may wait in the dispatcher's queue before it is sent, so the
lease covers the wait and the send:

- the queue holds at most about a batch of sendable jobs ahead of it, sent
  `concurrency` at a time, each wave taking at most HTTP_TIMEOUT_SECONDS:
  ceil(batch / concurrency) timeouts, plus one for its own send;
- an endpoint whose sends fail is sent to one request at a time until its
  breaker opens, so its jobs may wait up to BREAKER_FAILURE_THRESHOLD more;
- and a margin for recording, a slow database, a pause.

CLAIM_LEASE_SECONDS or --lease-seconds replace the whole sum.
"""

from __future__ import annotations

import math

MARGIN_SECONDS = 60.0


def default_lease_seconds(
    *,
    batch_size: int,
    concurrency: int,
    timeout: float,
    breaker_threshold: int,
    margin: float = MARGIN_SECONDS,
) -> float:
    """(ceil(batch / concurrency) + 1 + breaker threshold) x timeout + margin."""
    waves = math.ceil(max(1, batch_size) / max(1, concurrency)) + 1 + breaker_threshold
    return waves * timeout + margin
