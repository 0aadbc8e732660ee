"""Reads for events and deliveries."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from deliveries.models import Attempt, Delivery, Event


def events_with_deliveries() -> QuerySet[Event]:
    return Event.objects.select_related("merchant").prefetch_related(
        Prefetch("deliveries", queryset=Delivery.objects.order_by("pk"))
    )


def deliveries_filtered(
    *,
    merchant_id: int | None = None,
    endpoint_id: str | None = None,
    status: str | None = None,
) -> QuerySet[Delivery]:
    deliveries = Delivery.objects.select_related("endpoint__merchant")
    if merchant_id is not None:
        deliveries = deliveries.filter(endpoint__merchant_id=merchant_id)
    if endpoint_id is not None:
        deliveries = deliveries.filter(endpoint_id=endpoint_id)
    if status is not None:
        deliveries = deliveries.filter(status=status)
    return deliveries


def delivery_with_attempts() -> QuerySet[Delivery]:
    return Delivery.objects.select_related("endpoint__merchant").prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("number"))
    )
