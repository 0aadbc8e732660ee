"""Rows with chosen states and timestamps, for answers known in advance."""

from __future__ import annotations

from datetime import datetime, timedelta

from deliveries.models import Attempt, Delivery, Event
from endpoints.models import Endpoint


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
    event = event or Event.objects.create(
        merchant=endpoint.merchant,
        type="payment.captured",
        data={},
        created_at=created_at,
    )
    d = Delivery.objects.create(
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
