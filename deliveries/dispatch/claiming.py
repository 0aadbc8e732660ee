"""Every locking query of the dispatcher, and nothing else.

A claim is one short transaction: lock due rows with SKIP LOCKED, mark them
delivering under a lease, commit. The lease is the whole crash recovery: a
delivering row whose lease has run out is due again, and the next claim
takes it over, spending the lost attempt as `lease_expired`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from deliveries.dispatch.errors import LEASE_EXPIRED
from deliveries.models import Attempt, Delivery
from endpoints.models import EndpointHealth

logger = logging.getLogger(__name__)

DUE_STATUSES = (Delivery.Status.PENDING, Delivery.Status.DELIVERING)
_CLAIM_FIELDS = (
    "id",
    "status",
    "claimed_by",
    "attempt_count",
    "budget_start",
    "endpoint_id",
    "endpoint__max_attempts",
)


@dataclass
class Claim:
    """What one claim took: the rows to send now, under one lease value."""

    lease_until: datetime
    delivery_ids: list[str] = field(default_factory=list)
    probe_ids: set[str] = field(default_factory=set)
    reclaimed: int = 0
    dead_on_reclaim: int = 0


def claim_batch(
    *, worker_id: str, now: datetime, lease_seconds: float, limit: int
) -> Claim:
    """Claim up to `limit` due deliveries of active endpoints with a closed breaker."""
    claim = Claim(lease_until=now + timedelta(seconds=lease_seconds))
    if limit <= 0:
        return claim
    with transaction.atomic():
        rows = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            # Due pending rows and expired leases alike: while delivering,
            # next_attempt_at is the lease end (see Delivery.next_attempt_at).
            .filter(status__in=DUE_STATUSES, next_attempt_at__lte=now)
            # Disabled endpoints and open breakers hold their rows back
            # without spending attempts; the join keeps them out of the batch.
            .filter(endpoint__is_active=True)
            .filter(
                Q(endpoint__health__breaker_state=EndpointHealth.State.CLOSED)
                | Q(endpoint__health__isnull=True)  # made outside the services
            )
            # Oldest due first, so nothing starves behind newer work.
            .order_by("next_attempt_at")
            .values(*_CLAIM_FIELDS)[:limit]
        )
        _take(rows, claim=claim, worker_id=worker_id, now=now)
    return claim


def claim_probes(*, worker_id: str, now: datetime, lease_seconds: float) -> Claim:
    """For each endpoint whose breaker cooldown is over, claim exactly one probe.

    The conditional UPDATE on the health row decides the winner: under
    concurrent dispatchers only one sees the row still due for a probe. A
    half-open breaker whose probe was lost with its worker is due again once
    the probe's lease has run out (next_probe_at is set to it).
    """
    claim = Claim(lease_until=now + timedelta(seconds=lease_seconds))
    due = EndpointHealth.objects.filter(
        breaker_state__in=[EndpointHealth.State.OPEN, EndpointHealth.State.HALF_OPEN],
        next_probe_at__lte=now,
        endpoint__is_active=True,
    ).values_list("endpoint_id", flat=True)
    for endpoint_id in list(due):
        with transaction.atomic():
            won = EndpointHealth.objects.filter(
                endpoint_id=endpoint_id,
                breaker_state__in=[
                    EndpointHealth.State.OPEN,
                    EndpointHealth.State.HALF_OPEN,
                ],
                next_probe_at__lte=now,
            ).update(
                breaker_state=EndpointHealth.State.HALF_OPEN,
                next_probe_at=claim.lease_until,
            )
            if not won:
                continue
            rows = list(
                Delivery.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(
                    endpoint_id=endpoint_id,
                    status__in=DUE_STATUSES,
                    next_attempt_at__lte=now,
                )
                .order_by("next_attempt_at")
                .values(*_CLAIM_FIELDS)[:1]
            )
            taken = _take(rows, claim=claim, worker_id=worker_id, now=now)
            if taken:
                claim.probe_ids.add(taken[0])
                EndpointHealth.objects.filter(endpoint_id=endpoint_id).update(
                    probe_delivery_id=taken[0]
                )
            else:
                # Nothing due to probe with: stay open and look again next time.
                EndpointHealth.objects.filter(endpoint_id=endpoint_id).update(
                    breaker_state=EndpointHealth.State.OPEN,
                    next_probe_at=now,
                    probe_delivery_id="",
                )
    return claim


def _take(
    rows: list[dict], *, claim: Claim, worker_id: str, now: datetime
) -> list[str]:
    """Mark locked rows delivering; expired leases spend their lost attempt first."""
    fresh = [r["id"] for r in rows if r["status"] == Delivery.Status.PENDING]
    expired = [r for r in rows if r["status"] == Delivery.Status.DELIVERING]
    lost_attempts = []
    exhausted: list[str] = []
    resend: list[str] = []
    for row in expired:
        max_attempts = row["endpoint__max_attempts"] or settings.MAX_ATTEMPTS
        used = row["attempt_count"] + 1 - row["budget_start"]
        out_of_attempts = used >= max_attempts
        logger.warning(
            "reclaimed delivery=%s endpoint=%s lost_by=%s",
            row["id"],
            row["endpoint_id"],
            row["claimed_by"],
        )
        # The same line every other attempt gets, so one grep shows them all.
        logger.info(
            "attempt delivery=%s endpoint=%s number=%d outcome=%s status=- ms=- error=%s",
            row["id"],
            row["endpoint_id"],
            row["attempt_count"] + 1,
            "dead" if out_of_attempts else "retry",
            LEASE_EXPIRED,
        )
        (exhausted if out_of_attempts else resend).append(row["id"])
        lost_attempts.append(
            Attempt(
                delivery_id=row["id"],
                endpoint_id=row["endpoint_id"],
                number=row["attempt_count"] + 1,
                started_at=now,
                error_kind=LEASE_EXPIRED,
                error_message="the worker died or lost its lease before recording",
                worker_id=row["claimed_by"],
                outcome=Attempt.Outcome.DEAD
                if out_of_attempts
                else Attempt.Outcome.RETRY,
            )
        )
    if lost_attempts:
        Attempt.objects.bulk_create(lost_attempts)
        Delivery.objects.filter(pk__in=[r["id"] for r in expired]).update(
            attempt_count=F("attempt_count") + 1,
            last_error=LEASE_EXPIRED,
            last_status_code=None,
            last_attempt_at=now,
        )
    if exhausted:
        Delivery.objects.filter(pk__in=exhausted).update(
            status=Delivery.Status.DEAD,
            dead_at=now,
            claimed_by="",
            claimed_until=None,
        )
    taken = fresh + resend
    if taken:
        Delivery.objects.filter(pk__in=taken).update(
            status=Delivery.Status.DELIVERING,
            claimed_by=worker_id,
            claimed_until=claim.lease_until,
            next_attempt_at=claim.lease_until,
        )
    claim.delivery_ids.extend(taken)
    claim.reclaimed += len(expired)
    claim.dead_on_reclaim += len(exhausted)
    return taken


def release(
    *, worker_id: str, lease_until: datetime, delivery_ids: list[str], due_at: datetime
) -> int:
    """Give claimed-but-unsent rows back, due at `due_at`, without spending attempts."""
    if not delivery_ids:
        return 0
    return Delivery.objects.filter(
        pk__in=delivery_ids,
        status=Delivery.Status.DELIVERING,
        claimed_by=worker_id,
        claimed_until=lease_until,
    ).update(
        status=Delivery.Status.PENDING,
        claimed_by="",
        claimed_until=None,
        next_attempt_at=due_at,
    )


def probe_abandon(*, endpoint_id: str, now: datetime) -> None:
    """A probe that was never sent: the breaker goes back to open, due at once."""
    EndpointHealth.objects.filter(
        endpoint_id=endpoint_id, breaker_state=EndpointHealth.State.HALF_OPEN
    ).update(
        breaker_state=EndpointHealth.State.OPEN, next_probe_at=now, probe_delivery_id=""
    )
