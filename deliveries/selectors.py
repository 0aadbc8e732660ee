"""Reads for events and deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, Prefetch, Q, QuerySet

from deliveries.models import Attempt, Delivery, Event
from relayproject.lib import rowsql


def events_with_deliveries() -> QuerySet[Event]:
    return Event.objects.select_related("merchant").prefetch_related(
        Prefetch("deliveries", queryset=Delivery.objects.order_by("pk"))
    )


def event_by_idempotency_key(*, scope: str, key: str) -> Event | None:
    """The event stored under an Idempotency-Key, with its deliveries (by id)
    as `created_deliveries`, in one query; merchant is left to the caller."""
    sql = (
        f"SELECT {rowsql.columns(Event, 'ev')}, d.id, d.endpoint_id, d.status "
        "FROM deliveries_event ev "
        "LEFT JOIN deliveries_delivery d ON d.event_id = ev.id "
        "WHERE ev.idempotency_scope = %s AND ev.idempotency_key = %s ORDER BY d.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [scope, key])
        rows = cursor.fetchall()
    if not rows:
        return None
    event = rowsql.from_row(Event, rows[0][:-3])
    event.created_deliveries = [
        Delivery(id=row[-3], event_id=event.pk, endpoint_id=row[-2], status=row[-1])
        for row in rows
        if row[-3] is not None
    ]
    return event


def deliveries_filtered(
    *,
    merchant_id: int | None = None,
    endpoint_id: str | None = None,
    status: str | None = None,
) -> QuerySet[Delivery]:
    # endpoint__health: the held reason of each row reads it.
    deliveries = Delivery.objects.select_related(
        "endpoint__merchant", "endpoint__health"
    )
    if merchant_id is not None:
        deliveries = deliveries.filter(endpoint__merchant_id=merchant_id)
    if endpoint_id is not None:
        deliveries = deliveries.filter(endpoint_id=endpoint_id)
    if status is not None:
        deliveries = deliveries.filter(status=status)
    return deliveries


def delivery_with_attempts() -> QuerySet[Delivery]:
    return Delivery.objects.select_related(
        "endpoint__merchant", "endpoint__health"
    ).prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("number"))
    )


def dead_count_of_endpoint(*, endpoint_id: str) -> int:
    return Delivery.objects.filter(
        endpoint_id=endpoint_id, status=Delivery.Status.DEAD
    ).count()


@dataclass(frozen=True)
class Unfinished:
    due: int  # pending and due now
    later: int  # pending, due later
    in_flight: int  # delivering


def endpoint_unfinished(*, endpoint_id: str, now: datetime) -> Unfinished:
    """One endpoint's unfinished deliveries by when they may go, in one query."""
    counts = Delivery.objects.filter(
        endpoint_id=endpoint_id,
        status__in=Delivery.Status.UNFINISHED,
    ).aggregate(
        due=Count(
            "pk", filter=Q(status=Delivery.Status.PENDING, next_attempt_at__lte=now)
        ),
        later=Count(
            "pk", filter=Q(status=Delivery.Status.PENDING, next_attempt_at__gt=now)
        ),
        in_flight=Count("pk", filter=Q(status=Delivery.Status.DELIVERING)),
    )
    return Unfinished(**counts)
