"""Publishing as the REST API needs it: idempotent single events, mixed batches.

Idempotency-Key: one event per (scope, key), whatever the race. On
PostgreSQL each request first takes a transaction-scoped advisory lock on
hashtext(scope:key) with pg_try_advisory_xact_lock: if another request holds
it, this one answers 409 at once instead of waiting (CONTRACT: "a concurrent
request with a key still in progress answers 409"). Holding that lock, it
looks the key up and inserts only if it is new: events are partitioned by
day there, and a unique index on a partitioned table must include the
partition key, so the index alone cannot see a key used on another day. A
hash collision between two different keys only costs a spurious 409, which
the client retries. SQLite serialises writers (BEGIN IMMEDIATE) and keeps
the plain unique constraint, which decides there.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import IntegrityError, connection, transaction

from deliveries.models import Event
from deliveries.services import (
    EventInput,
    event_publish,
    events_publish,
    request_fingerprint,
)
from endpoints.models import Merchant


class IdempotencyInProgress(Exception):
    """Another request with the same key has not finished yet."""


class IdempotencyMismatch(Exception):
    """The key was already used for a different request."""


def _lock_key(*, scope: str, key: str) -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(hashtext(%s))", [f"{scope}:{key}"]
        )
        return bool(cursor.fetchone()[0])


def event_publish_idempotent(
    *, merchant: Merchant, type: str, data: object, key: str, scope: str
) -> tuple[Event, bool]:
    """(event, replayed): the event this key made before, or a new one."""
    fingerprint = request_fingerprint(merchant=merchant.slug, type=type, data=data)
    with transaction.atomic():
        if not _lock_key(scope=scope, key=key):
            raise IdempotencyInProgress(key)
        existing = _event_with_key(scope=scope, key=key)
        if existing is not None:
            return _replayed(existing, fingerprint=fingerprint, key=key)
        try:
            with transaction.atomic():
                event = event_publish(
                    merchant=merchant,
                    type=type,
                    data=data,
                    idempotency_key=key,
                    idempotency_scope=scope,
                )
            return event, False
        except IntegrityError:
            existing = _event_with_key(scope=scope, key=key)
    if existing is None:
        # The other transaction rolled back between our insert and our read.
        raise IdempotencyInProgress(key)
    return _replayed(existing, fingerprint=fingerprint, key=key)


def _event_with_key(*, scope: str, key: str) -> Event | None:
    return Event.objects.filter(idempotency_scope=scope, idempotency_key=key).first()


def _replayed(event: Event, *, fingerprint: str, key: str) -> tuple[Event, bool]:
    if event.request_fingerprint != fingerprint:
        raise IdempotencyMismatch(key)
    return event, True


def events_publish_mixed(
    *, items: Sequence[tuple[Merchant, EventInput]]
) -> list[Event]:
    """Events of several merchants in one transaction, returned in input order."""
    by_merchant: dict[int, list[int]] = {}
    for index, (merchant, _) in enumerate(items):
        by_merchant.setdefault(merchant.pk, []).append(index)
    published: list[Event | None] = [None] * len(items)
    with transaction.atomic():
        for indexes in by_merchant.values():
            events = events_publish(
                merchant=items[indexes[0]][0],
                events=[items[i][1] for i in indexes],
            )
            for index, event in zip(indexes, events, strict=True):
                published[index] = event
    return published  # type: ignore[return-value]
