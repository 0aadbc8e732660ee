"""GET .../messages: lease a pull endpoint's due messages to a consumer.

One short transaction: the endpoint's oldest due rows, locked SKIP LOCKED (two
consumers polling at once take different rows, and neither waits for the
other), marked delivering under a lease that ends after the endpoint's
visibility timeout. A row whose earlier lease ran out is due too: its lost
attempt is spent first (`lease_expired`), and it goes dead instead when that
was its last, exactly as the dispatchers' claim treats an expired lease.
On an ordered endpoint only a lane's head is ever pending, so the next of a
key is not handed out before the previous is acked or dead.
"""

from __future__ import annotations

import os
import socket
from collections import Counter as Tally
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from deliveries.lanes import lanes_advance
from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.ops import counters
from deliveries.pull.rendering import Message, messages_render
from endpoints.models import Endpoint
from endpoints.retry_policy import policy_in_force

MAX_LIMIT = 100  # messages per pull (contract section 8)
# claimed_by of a pulled row: no dispatcher's worker id, so no dispatcher's
# rescue (deliveries/dispatch/rescue.py) ever releases it.
PULLED_BY = "pull"
LOST_MESSAGE = "the consumer did not ack or nack it within its visibility timeout"


def counter_shard(what: str) -> str:
    """The counters' shard (deliveries.ops.counters) of this web process's
    `what` ("pull-lease": leases a pull spends; "pull": acks and nacks): one
    row per process and series, as each dispatcher has its own, so consumers
    pulling and acking at once through several processes never wait on one
    row. Read at each call: gunicorn forks its workers after loading the app."""
    return f"{what}:{socket.gethostname()}-{os.getpid()}"


def visibility_seconds(endpoint: Endpoint) -> int:
    if endpoint.visibility_timeout_seconds is not None:
        return endpoint.visibility_timeout_seconds
    return settings.PULL_VISIBILITY_TIMEOUT_SECONDS


def messages_lease(*, endpoint: Endpoint, limit: int, now: datetime) -> list[Message]:
    """Lease up to `limit` of the endpoint's due messages; [] when the endpoint
    or its merchant is switched off (they wait, as an HTTP endpoint's do)."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    if not endpoint.is_active or not endpoint.merchant.is_active:
        return []
    lease_until = now + timedelta(seconds=visibility_seconds(endpoint))
    max_attempts = policy_in_force(endpoint).max_attempts
    due = Delivery.objects.filter(
        merchant_id=endpoint.merchant_id,
        endpoint_id=endpoint.pk,
        status__in=Delivery.Status.UNFINISHED,
        next_attempt_at__lte=now,
    )
    # A lock-free look first, as the dispatchers' claim does: an idle
    # consumer's poll of an empty endpoint is one read, not a transaction.
    # Whatever it finds is read again under the locks below.
    if not due.exists():
        return []
    with transaction.atomic():
        rows = list(
            due.select_for_update(skip_locked=True, of=("self",))
            .order_by("next_attempt_at")
            .values(
                "id",
                "status",
                "claimed_by",
                "attempt_count",
                "budget_start",
                "ordering_key",
                "event_id",
            )[:limit]
        )
        taken = _expired_spend(
            rows, endpoint=endpoint, max_attempts=max_attempts, now=now
        )
        if not taken:
            return []
        Delivery.objects.filter(merchant_id=endpoint.merchant_id, pk__in=taken).update(
            status=Delivery.Status.DELIVERING,
            claimed_by=PULLED_BY,
            claimed_until=lease_until,
            next_attempt_at=lease_until,
            # The lease is the attempt's start: an ack's duration is measured
            # from it (latency, lease to ack).
            last_attempt_at=now,
        )
    leased = [r for r in rows if r["id"] in taken]
    return messages_render(
        endpoint=endpoint, rows=leased, lease_until=lease_until, now=now
    )


def _expired_spend(
    rows: list[dict], *, endpoint: Endpoint, max_attempts: int, now: datetime
) -> set[str]:
    """Spend the lost attempt of each row whose lease ran out (in `rows`, as
    read, its attempt_count moves up by one); the ids still to lease."""
    taken = {r["id"] for r in rows if r["status"] == Delivery.Status.PENDING}
    expired = [r for r in rows if r["status"] == Delivery.Status.DELIVERING]
    if not expired:
        return taken
    dead = []
    attempts = []
    for row in expired:
        row["attempt_count"] += 1
        out = row["attempt_count"] - row["budget_start"] >= max_attempts
        attempts.append(lost_attempt(row, endpoint=endpoint, now=now, dead=out))
        if out:
            dead.append(row["id"])
        else:
            taken.add(row["id"])
    Attempt.objects.bulk_create(attempts)
    # Counted as the dispatchers count the expired leases they take over
    # (relay_reclaimed_total), always in this order.
    counters.counters_add(
        shard=counter_shard("pull-lease"),
        tally=Tally(
            {
                (counters.RECLAIMED, ""): len(expired),
                (counters.ATTEMPTS, "retry"): len(expired) - len(dead),
                (counters.ATTEMPTS, "dead"): len(dead),
                (counters.DELIVERIES, "dead"): len(dead),
            }
        ),
    )
    Delivery.objects.filter(
        merchant_id=endpoint.merchant_id, pk__in=[r["id"] for r in expired]
    ).update(
        attempt_count=F("attempt_count") + 1,
        last_error=ErrorKind.LEASE_EXPIRED,
        last_status_code=None,
    )
    if dead:
        Delivery.objects.filter(merchant_id=endpoint.merchant_id, pk__in=dead).update(
            status=Delivery.Status.DEAD, dead_at=now, claimed_by="", claimed_until=None
        )
        lanes_advance(
            lanes=[
                (endpoint.merchant_id, endpoint.pk, r["ordering_key"])
                for r in expired
                if r["id"] in dead
            ],
            now=now,
        )
    return taken


def lost_attempt(
    row: dict, *, endpoint: Endpoint, now: datetime, dead: bool
) -> Attempt:
    """The attempt a lease that ran out spent (row["attempt_count"] already counts it)."""
    return Attempt(
        delivery_id=row["id"],
        endpoint_id=endpoint.pk,
        merchant_id=endpoint.merchant_id,
        number=row["attempt_count"],
        started_at=now,
        error_kind=ErrorKind.LEASE_EXPIRED,
        error_message=LOST_MESSAGE,
        worker_id=row["claimed_by"],
        outcome=Attempt.Outcome.DEAD if dead else Attempt.Outcome.RETRY,
    )
