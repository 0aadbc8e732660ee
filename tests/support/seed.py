"""Rows with chosen states and timestamps, for answers known in advance."""

from __future__ import annotations

from datetime import datetime, timedelta

from deliveries.models import Attempt, Delivery, Event
from endpoints.models import Endpoint
from relayproject.lib.ids import new_id


def delivery(
    endpoint: Endpoint,
    *,
    status: str,
    created_at: datetime,
    attempts: int = 0,
    budget_start: int = 0,
    next_attempt_at: datetime | None = None,
    succeeded_at: datetime | None = None,
    dead_at: datetime | None = None,
    last_status_code: int | None = None,
    last_error: str = "",
    event: Event | None = None,
    with_attempts: bool = False,
) -> Delivery:
    # Ids carry their creation time (and on PostgreSQL pick the partition):
    # made at created_at, as they would have been.
    event = event or Event.objects.create(
        id=new_id("evt", at=created_at),
        merchant=endpoint.merchant,
        type="payment.captured",
        data={},
        created_at=created_at,
    )
    d = Delivery.objects.create(
        id=new_id("dlv", at=created_at),
        event=event,
        endpoint=endpoint,
        status=status,
        attempt_count=attempts,
        budget_start=budget_start,
        next_attempt_at=next_attempt_at or created_at,
        claimed_by="w1" if status == "delivering" else "",
        claimed_until=created_at + timedelta(minutes=5)
        if status == "delivering"
        else None,
        created_at=created_at,
        succeeded_at=succeeded_at,
        dead_at=dead_at,
        last_status_code=last_status_code,
        last_error=last_error,
    )
    if with_attempts:
        for n in range(1, attempts + 1):
            last = n == attempts
            Attempt.objects.create(
                delivery=d,
                endpoint=endpoint,
                number=n,
                started_at=created_at + timedelta(seconds=n),
                response_ms=10.0 * n,
                status_code=last_status_code,
                error_kind="" if last_status_code else "timeout",
                error_message=last_error,
                response_body="x" * 300,
                worker_id="w1",
                outcome=status if last and status in ("succeeded", "dead") else "retry",
            )
    return d


def history(endpoint: Endpoint, other: Endpoint, *, old: datetime, now: datetime):
    """One old row in each state, one recent succeeded one, and an old event
    shared by a succeeded delivery and one still pending (to `other`)."""
    rows = {
        status: delivery(
            endpoint,
            status=status,
            created_at=old,
            attempts=2,
            with_attempts=True,
            succeeded_at=old if status == "succeeded" else None,
            dead_at=old if status == "dead" else None,
        )
        for status in ("pending", "delivering", "succeeded", "dead")
    }
    rows["recent"] = delivery(
        endpoint,
        status="succeeded",
        created_at=now,
        succeeded_at=now,
        attempts=1,
        with_attempts=True,
    )
    rows["shared"] = delivery(
        endpoint,
        status="succeeded",
        created_at=old,
        succeeded_at=old,
        attempts=1,
        with_attempts=True,
    )
    rows["shared_pending"] = delivery(
        other, status="pending", created_at=old, event=rows["shared"].event
    )
    return rows
