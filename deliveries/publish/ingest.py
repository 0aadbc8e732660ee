"""Publishing as the REST API needs it: by merchant slug, idempotent, in batches.

A publish is two round trips, outside a transaction, so no BEGIN/COMMIT:
the merchants' publish buckets (`deliveries.publish.rate`, skipped when the
rate is off), then one statement that writes the events, their deliveries
and the NOTIFY (`deliveries.publish.outbox`). The merchants and their active
endpoints come from this process's cache (`endpoints.audiences`), checked by
that statement; a merchant not cached, or changed, costs one query that
reads them.

Idempotency-Key: one event per (scope, key), whatever the race. On
PostgreSQL the request runs in a transaction whose first statement reads the
merchant and takes a transaction-scoped advisory lock on hashtext(scope:key)
with pg_try_advisory_xact_lock: if another request holds it, this one
answers 409 at once instead of waiting (CONTRACT: "a concurrent request with
a key still in progress answers 409"). Holding that lock, the writing
statement (whose snapshot is younger than the lock, so it sees any event a
previous holder committed) inserts only if no event has the key: events are
partitioned by day there, and a unique index on a partitioned table must
include the partition key, so the index alone cannot see a key used on
another day. A replay reads the stored event: a third statement. A hash
collision between two different keys only costs a spurious 409, which the
client retries. SQLite serialises writers (BEGIN IMMEDIATE) and keeps the
plain unique constraint, which decides there.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from django.db import transaction

from deliveries.models import Event
from deliveries.publish.rate import publish_rate_take
from deliveries.selectors import event_by_idempotency_key
from deliveries.services import EventInput, drafts_publish, request_fingerprint
from endpoints.audiences import Audience, audience_locked, audiences
from relayproject.lib import dbfeatures
from relayproject.lib.clock import utcnow


class IdempotencyInProgress(Exception):
    """Another request with the same key has not finished yet."""


class IdempotencyMismatch(Exception):
    """The key was already used for a different request."""


class UnknownMerchant(Exception):
    """No such merchant, or one the API key may not see; index is the
    position of the first such event in a batch."""

    def __init__(self, slug: str, index: int = 0) -> None:
        super().__init__(slug)
        self.slug = slug
        self.index = index


def _visible(
    slugs: Collection[str], only_merchant: int | None, *, cached: bool
) -> dict[str, Audience]:
    found = audiences(slugs=slugs, cached=cached)
    if only_merchant is None:
        return found
    # A scoped key sees another merchant as absent, never as forbidden.
    return {s: a for s, a in found.items() if a.merchant.pk == only_merchant}


def event_ingest(
    *,
    merchant: str,
    type: str,
    data: object,
    ordering_key: str = "",
    only_merchant: int | None = None,
    key: str | None = None,
    scope: str = "",
) -> tuple[Event, bool]:
    """(event, replayed): a new event, or with a key the one it made before.

    only_merchant: the id of the one merchant the caller may publish for.
    Raises UnknownMerchant, validation.EventsRefused, IdempotencyInProgress,
    IdempotencyMismatch, LimitExceeded (the fan-out, the publish rate); a
    refused request writes nothing.
    """
    if key is None:

        def read(cached: bool) -> list[tuple[Audience, EventInput]]:
            found = _visible([merchant], only_merchant, cached=cached)
            if merchant not in found:
                raise UnknownMerchant(merchant)
            item = EventInput(type, data, ordering_key=ordering_key)
            return [(found[merchant], item)]

        return drafts_publish(read=read, now=utcnow(), rate_limited=True)[0], False
    with transaction.atomic():
        if dbfeatures.shared_by_many_processes():
            audience, got = audience_locked(slug=merchant, lock=f"{scope}:{key}")
        else:
            audience, got = audiences(slugs=[merchant]).get(merchant), True
        if audience is None or only_merchant not in (None, audience.merchant.pk):
            raise UnknownMerchant(merchant)
        if not got:
            raise IdempotencyInProgress(key)
        # Read under the lock (not cached), so the write checks nothing more.
        items = [(audience, EventInput(type, data, key, scope, ordering_key))]
        now = utcnow()
        created = drafts_publish(read=lambda cached: items, now=now, only_new_key=True)
        if created:
            # In this transaction, after the write: a replay takes no token, the
            # bucket's row stays locked only until the commit just below, and a
            # refusal rolls the write back (deliveries/publish/rate.py).
            merchant = audience.merchant
            publish_rate_take(costs={merchant.pk: (merchant, 1)}, now=now.timestamp())
            return created[0], False
        existing = event_by_idempotency_key(scope=scope, key=key)
    if existing is None:
        # SQLite: the other transaction rolled back between our insert and read.
        raise IdempotencyInProgress(key)
    fingerprint = request_fingerprint(merchant=merchant, type=type, data=data)
    if existing.request_fingerprint != fingerprint:
        raise IdempotencyMismatch(key)
    existing.merchant = audience.merchant  # the same slug, or the print differs
    return existing, True


def events_ingest(
    *,
    items: Sequence[tuple[str, str, object] | tuple[str, str, object, str]],
    only_merchant: int | None = None,
) -> list[Event]:
    """Events of any merchants, (slug, type, data[, ordering key]) each: all
    or none, in order (the order a lane takes them in).

    Raises UnknownMerchant for the first event of a merchant the caller may
    not see, then validation.EventsRefused naming every refused event.
    """

    def read(cached: bool) -> list[tuple[Audience, EventInput]]:
        visible = _visible({item[0] for item in items}, only_merchant, cached=cached)
        for index, (slug, *_) in enumerate(items):
            if slug not in visible:
                raise UnknownMerchant(slug, index)
        return [
            (visible[slug], EventInput(type, data, ordering_key="".join(key)))
            for slug, type, data, *key in items
        ]

    return drafts_publish(read=read, now=utcnow(), rate_limited=True)
