"""relay.delivery.dead, coalesced: dead letters are counted per endpoint as
they appear, and announced at most once per OPERATIONAL_COALESCE_SECONDS.

The first dead letter opens a window; when it closes, one event carries the
count and the first and last delivery ids. A dead letter is read a few
seconds after it was written (SETTLE), so a transaction that commits a
little late is never skipped by the watermark.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Min

from deliveries.models import Delivery
from deliveries.notifications.announce import announce
from deliveries.notifications.models import EndpointWatch, MaintenanceSlot
from deliveries.notifications.operational import (
    DELIVERY_DEAD,
    OPERATIONAL_MERCHANT_SLUG,
    endpoint_part,
    ts,
)
from endpoints.merchant_keyed import pinned
from endpoints.models import Endpoint

SETTLE = timedelta(seconds=2)
SLOT = "dead-letters"


def _locked_slot() -> MaintenanceSlot:
    MaintenanceSlot.objects.bulk_create(
        [MaintenanceSlot(name=SLOT)], ignore_conflicts=True
    )
    return MaintenanceSlot.objects.select_for_update().get(pk=SLOT)


def _edge_id(rows, *, last: bool) -> str:
    order = ("-dead_at", "-pk") if last else ("dead_at", "pk")
    return rows.order_by(*order).values_list("pk", flat=True).first()


def dead_letters_collect(*, now: datetime) -> int:
    """Add dead letters since the watermark to their endpoints' counts."""
    cutoff = now - SETTLE
    added = 0
    with transaction.atomic():
        slot = _locked_slot()
        if slot.mark is not None and slot.mark >= cutoff:
            return 0
        dead = Delivery.objects.filter(
            status=Delivery.Status.DEAD, dead_at__lte=cutoff
        ).exclude(endpoint__merchant__slug=OPERATIONAL_MERCHANT_SLUG)
        if slot.mark is not None:
            dead = dead.filter(dead_at__gt=slot.mark)
        groups = (
            dead.order_by()
            .values("endpoint_id")
            .annotate(n=Count("pk"), first=Min("dead_at"), last=Max("dead_at"))
        )
        for group in groups:
            rows = dead.filter(endpoint_id=group["endpoint_id"])
            EndpointWatch.objects.bulk_create(
                [EndpointWatch(endpoint_id=group["endpoint_id"])],
                ignore_conflicts=True,
            )
            watch = (
                pinned(EndpointWatch.objects, group["endpoint_id"])
                .select_for_update()
                .get(pk=group["endpoint_id"])
            )
            if not watch.dead_count:
                watch.dead_first_id = _edge_id(rows, last=False)
                watch.dead_first_at = group["first"]
            watch.dead_count += group["n"]
            watch.dead_last_id = _edge_id(rows, last=True)
            watch.dead_last_at = group["last"]
            watch.save()
            added += group["n"]
        slot.mark = cutoff
        slot.save(update_fields=["mark"])
    return added


def dead_letters_announce(*, now: datetime) -> list[str]:
    """One relay.delivery.dead per endpoint whose window has closed; their ids."""
    window = timedelta(seconds=settings.OPERATIONAL_COALESCE_SECONDS)
    due = EndpointWatch.objects.filter(
        dead_count__gt=0, dead_first_at__lte=now - window
    ).values_list("pk", flat=True)
    announced = []
    for endpoint_id in list(due):
        with transaction.atomic():
            watch = (
                pinned(EndpointWatch.objects, endpoint_id)
                .select_for_update()
                .get(pk=endpoint_id)
            )
            if not watch.dead_count:
                continue  # another process announced it meanwhile
            if watch.dead_said_at is not None and now - watch.dead_said_at < window:
                continue
            endpoint = Endpoint.objects.select_related("merchant").get(pk=endpoint_id)
            last = (
                Delivery.objects.filter(pk=watch.dead_last_id)
                .values("last_error", "last_status_code")
                .first()
            ) or {"last_error": "", "last_status_code": None}
            announce(
                endpoint=endpoint,
                watch=watch,
                event_type=DELIVERY_DEAD,
                data={
                    "merchant": endpoint.merchant.slug,
                    "endpoint": endpoint_part(endpoint),
                    "count": watch.dead_count,
                    "first_delivery_id": watch.dead_first_id,
                    "last_delivery_id": watch.dead_last_id,
                    "first_dead_at": ts(watch.dead_first_at),
                    "last_dead_at": ts(watch.dead_last_at),
                    **last,
                },
                now=now,
            )
            watch.dead_count = 0
            watch.dead_first_id = watch.dead_last_id = ""
            watch.dead_first_at = watch.dead_last_at = None
            watch.dead_said_at = now
            watch.save()
            announced.append(endpoint_id)
    return announced
