"""Retention: drop old delivery history.

On PostgreSQL the history tables are partitioned by the day a row was made
(deliveries.history.partitions): a prune drops whole days older than the cutoff,
keeping the rows that must stay (pending and in-flight deliveries always,
dead letters unless asked, and their attempts and events), so it takes
milliseconds per day and leaves no bloat. The cutoff is the start of the
UTC day DAYS ago: a day goes once all of it is old enough. Rows kept by an
earlier prune wait in the default partition and are deleted from there, in
batches, once they qualify.

On SQLite (and for that default partition) rows are deleted in batches, each
its own short transaction, so a prune never holds locks that the dispatchers
or the API would wait on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Exists, OuterRef

from deliveries.history import partitions
from deliveries.models import Attempt, Delivery, Event
from endpoints.merchant_keyed import per_merchant
from relayproject.lib.ids import id_floor

BATCH_SIZE = 500


@dataclass
class PruneResult:
    deliveries: int = 0
    attempts: int = 0
    events: int = 0
    before: datetime | None = None  # the cutoff applied
    partitions: int = 0  # day partitions dropped (PostgreSQL)
    # A dry run's figures that are estimates (sized from table statistics),
    # and how they were made, for the command to say.
    estimated: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()


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
    if partitions.partitioned():
        return _prune_partitioned(
            before=before,
            include_dead=include_dead,
            dry_run=dry_run,
            batch_size=batch_size,
        )
    result = PruneResult(before=before)
    _prune_batches(
        _prunable(before=before, include_dead=include_dead),
        result,
        dry_run=dry_run,
        batch_size=batch_size,
    )
    return result


def _prune_partitioned(
    *, before: datetime, include_dead: bool, dry_run: bool, batch_size: int
) -> PruneResult:
    day = before.astimezone(UTC).date()
    cutoff = partitions.day_start(day)
    result = PruneResult(before=cutoff)
    if dry_run:
        _count_partitioned(result, include_dead=include_dead)
        return result
    for old_day in partitions.days_to_drop(before=day):
        dropped = partitions.day_drop(
            day=old_day, before=day, include_dead=include_dead
        )
        result.partitions += dropped.partitions
        result.deliveries += dropped.deliveries
        result.attempts += dropped.attempts
        result.events += dropped.events
    # Every day before the cutoff is gone: what is left that old lives in
    # the default partition (kept earlier, e.g. replayed, or dead letters).
    leftovers = [
        queryset.filter(pk__lt=id_floor("dlv", cutoff))
        for queryset in _prunable(before=cutoff, include_dead=include_dead)
    ]
    _prune_batches(leftovers, result, dry_run=False, batch_size=batch_size)
    return result


def _count_partitioned(result: PruneResult, *, include_dead: bool) -> None:
    """What a prune would remove: the rows of the days it drops, less those it
    keeps, plus the ones of the default partition it deletes. Days are sized
    by their statistics (see partitions.rows_before). The kept deliveries
    (a few per cent, found through the partial indexes) are counted with
    their events; their attempts are not looked up but summed from
    attempt_count, which numbers each delivery's attempts (one row each):
    joining ~100 k kept deliveries to the attempts cost seconds at a million
    rows. A figure is "about" when a day it counts was sized by statistics.
    """
    day = result.before.date()
    kept = partitions.kept_deliveries(before=day, include_dead=include_dead)
    deliveries, estimated_d = partitions.rows_before(partitions.DELIVERIES, day=day)
    attempts, estimated_a = partitions.rows_before(partitions.ATTEMPTS, day=day)
    # An event's day goes a day after its deliveries' (see partitions).
    event_day = day - timedelta(days=1)
    events, estimated_e = partitions.rows_before(partitions.EVENTS, day=event_day)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT event_id) "
            "FILTER (WHERE event_id < %(events)s), "
            "coalesce(sum(attempt_count), 0) FROM deliveries_delivery "
            f"WHERE id < %(deliveries)s AND {kept}",
            {
                "deliveries": id_floor("dlv", result.before),
                "events": id_floor("evt", partitions.day_start(event_day)),
            },
        )
        kept_deliveries, kept_events, kept_attempts = cursor.fetchone()
    result.deliveries = deliveries - kept_deliveries
    result.attempts = attempts - kept_attempts
    result.events = events - kept_events
    result.estimated = frozenset(
        name
        for name, estimated in (
            ("deliveries", estimated_d),
            ("attempts", estimated_a),
            ("events", estimated_e),
        )
        if estimated
    )
    notes = ["kept attempts summed from attempt_count"]
    if result.estimated:
        notes.insert(0, "'about': the days' rows from table statistics")
    result.notes = tuple(notes)


def _prune_batches(
    querysets, result: PruneResult, *, dry_run: bool, batch_size: int
) -> None:
    for queryset in querysets:
        if dry_run:
            _count(queryset, result)
            continue
        # _prune_batch locks its batch: one merchant's rows at a time on Citus.
        for rows in per_merchant(queryset):
            while True:
                batch = _prune_batch(rows, batch_size)
                result.deliveries += batch.deliveries
                result.attempts += batch.attempts
                result.events += batch.events
                if batch.deliveries < batch_size:
                    break


def _count(queryset, result: PruneResult) -> None:
    result.deliveries += queryset.count()
    result.attempts += Attempt.objects.filter(
        delivery__in=queryset.values("pk")
    ).count()
    kept = Delivery.objects.filter(
        event=OuterRef("pk"), merchant_id=OuterRef("merchant_id")
    ).exclude(pk__in=queryset.values("pk"))
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
            ~Exists(
                Delivery.objects.filter(
                    event=OuterRef("pk"), merchant_id=OuterRef("merchant_id")
                )
            )
        )
        _, events = orphans.delete()
    return PruneResult(
        deliveries=per_model.get(Delivery._meta.label, 0),
        attempts=attempts,
        events=events.get(Event._meta.label, 0),
    )
