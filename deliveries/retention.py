"""Retention: delete old delivery history in small batches.

Each batch is its own short transaction, so a prune of millions of rows never
holds locks that the dispatchers or the API would wait on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef

from deliveries.models import Attempt, Delivery, Event

BATCH_SIZE = 500


@dataclass
class PruneResult:
    deliveries: int = 0
    attempts: int = 0
    events: int = 0


def _prunable(*, before: datetime, include_dead: bool):
    """Finished deliveries older than `before`; pending and delivering never."""
    # One indexed range per status: the partial succeeded_at and dead_at indexes.
    querysets = [
        Delivery.objects.filter(
            status=Delivery.Status.SUCCEEDED, succeeded_at__lt=before
        )
    ]
    if include_dead:
        querysets.append(
            Delivery.objects.filter(status=Delivery.Status.DEAD, dead_at__lt=before)
        )
    return querysets


def deliveries_prune(
    *,
    before: datetime,
    include_dead: bool = False,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
) -> PruneResult:
    """Delete finished deliveries older than `before`, their attempts, and the
    events left with no delivery; a dry run only counts them."""
    result = PruneResult()
    for queryset in _prunable(before=before, include_dead=include_dead):
        if dry_run:
            _count(queryset, result)
            continue
        while True:
            batch = _prune_batch(queryset, batch_size)
            result.deliveries += batch.deliveries
            result.attempts += batch.attempts
            result.events += batch.events
            if batch.deliveries < batch_size:
                break
    return result


def _count(queryset, result: PruneResult) -> None:
    result.deliveries += queryset.count()
    result.attempts += Attempt.objects.filter(
        delivery__in=queryset.values("pk")
    ).count()
    kept = Delivery.objects.filter(event=OuterRef("pk")).exclude(
        pk__in=queryset.values("pk")
    )
    result.events += (
        Event.objects.filter(pk__in=queryset.values("event_id"))
        .exclude(Exists(kept))
        .count()
    )


def _prune_batch(queryset, batch_size: int) -> PruneResult:
    with transaction.atomic():
        # Locking the batch keeps a concurrent replay from changing a row
        # between choosing it and deleting it; skip_locked never waits.
        rows = list(
            queryset.select_for_update(skip_locked=True)
            .order_by()
            .values_list("pk", "event_id")[:batch_size]
        )
        if not rows:
            return PruneResult()
        ids = [pk for pk, _ in rows]
        attempts, _ = Attempt.objects.filter(delivery_id__in=ids).delete()
        _, per_model = Delivery.objects.filter(pk__in=ids).delete()
        orphans = Event.objects.filter(pk__in={event for _, event in rows}).filter(
            ~Exists(Delivery.objects.filter(event=OuterRef("pk")))
        )
        _, events = orphans.delete()
    return PruneResult(
        deliveries=per_model.get(Delivery._meta.label, 0),
        attempts=attempts,
        events=events.get(Event._meta.label, 0),
    )
