"""Writes for events and deliveries: publish, replay, recover, and outcomes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from deliveries.models import Delivery, Event
from deliveries.publish import fanout, validation
from deliveries.publish.outbox import (
    NOTIFY_CHANNEL,
    Draft,
    Take,
    drafts_write,
    notify_dispatchers,
)
from endpoints import quotas
from endpoints.audiences import Audience, AudienceChanged, audiences
from endpoints.models import Endpoint, Merchant
from endpoints.switched_off import merchant_check_on
from relayproject.lib import rowsql
from relayproject.lib.clock import utcnow
from relayproject.lib.ids import new_ids
from relayproject.lib.limits import LimitExceeded
from relayproject.lib.tracing import current_traceparent, tracer

# Re-exported: the dispatcher listens on the channel, replay and recover notify.
__all__ = ["NOTIFY_CHANNEL", "notify_dispatchers"]


@dataclass(frozen=True)
class EventInput:
    type: str
    data: object
    idempotency_key: str | None = None
    idempotency_scope: str = ""
    ordering_key: str = ""  # deliveries/lanes.py; "" is unordered


def request_fingerprint(*, merchant: str, type: str, data: object) -> str:
    """Hash of what was asked, so a reused idempotency key can be told apart."""
    canonical = json.dumps(
        {"merchant": merchant, "type": type, "data": data},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def event_publish(
    *,
    merchant: Merchant,
    type: str,
    data: object,
    idempotency_key: str | None = None,
    idempotency_scope: str = "",
    ordering_key: str = "",
    endpoint_ids: Sequence[str] | None = None,
    now: datetime | None = None,
    rate_limited: bool = False,
) -> Event:
    """Store an event and one delivery per subscribed active endpoint, atomically.

    Runs inside the caller's transaction when there is one (a transactional
    outbox): the deliveries exist exactly when the caller's data does.
    endpoint_ids aims it at those active endpoints alone, whatever their
    event_types (a portal test event goes to one endpoint). One statement
    writes everything; before it, the merchant's endpoints are read unless
    this process has them cached (endpoints.audiences; the write checks them).
    Raises MerchantSwitchedOff (endpoints.switched_off) if staff switched the
    merchant off, whatever the state of the instance given. Not rate limited
    unless rate_limited (a person's request, as the portal's).
    ordering_key: ordered endpoints get the events sharing it one at a time,
    in publish order (deliveries/lanes.py).
    """
    return events_publish(
        merchant=merchant,
        events=[
            EventInput(type, data, idempotency_key, idempotency_scope, ordering_key)
        ],
        endpoint_ids=endpoint_ids,
        now=now,
        rate_limited=rate_limited,
    )[0]


def events_publish(
    *,
    merchant: Merchant,
    events: Sequence[EventInput],
    endpoint_ids: Sequence[str] | None = None,
    now: datetime | None = None,
    rate_limited: bool = False,
) -> list[Event]:
    """Publish several events of one merchant, all or none.

    Raises validation.EventsRefused (nothing written) if any event is refused,
    LimitExceeded past MAX_DELIVERIES_PER_REQUEST (or the publish rate).
    """

    def read(cached: bool) -> list[tuple[Audience, EventInput]]:
        found = audiences(merchant_ids=[merchant.pk], cached=cached)
        if not found:
            raise Merchant.DoesNotExist(f"No merchant with id {merchant.pk}.")
        # The merchant as read, not the caller's instance: drafts_prepare
        # checks that it is switched on.
        audience = next(iter(found.values()))
        return [(audience, item) for item in events]

    created = drafts_publish(
        read=read,
        aimed_at=None if endpoint_ids is None else set(endpoint_ids),
        now=now or utcnow(),
        rate_limited=rate_limited,
    )
    for event in created:
        # The caller's instance, so the events carry exactly the object they gave.
        event.merchant = merchant
    return created


Items = Sequence[tuple[Audience, EventInput]]


def drafts_publish(
    *,
    read: Callable[[bool], Items],
    now: datetime,
    aimed_at: Collection[str] | None = None,
    only_new_key: bool = False,
    rate_limited: bool = False,
) -> list[Event]:
    """Validate, fan out and write events in a relay.publish span, all or none.

    read(cached) gives the events with their audiences, cached ones first;
    if one of those had changed (the write checks, endpoints.audiences),
    nothing was written and the events are fanned out again to read(False).
    The span's W3C context is stored on each event, so the dispatcher's send
    spans can link back to the publishing trace. With only_new_key, see
    outbox.drafts_write: [] when the keyed event already existed. With
    rate_limited (the API, the portal), each event takes a token from its
    merchant's publish bucket (deliveries.publish.rate).
    """
    items = read(True)
    with tracer.start_as_current_span("relay.publish") as span:
        drafts = drafts_prepare(items=items, now=now, aimed_at=aimed_at)
        # After the checks (a refused request writes nothing), with the
        # write; deliveries/publish/rate.py argues the place.
        rate = Take(_costs(items), now.timestamp()) if rate_limited else None
        unchanged = {a.merchant.pk: a.fingerprint for a, _ in items if a.fingerprint}
        try:
            written = drafts_write(
                drafts, only_new_key=only_new_key, unchanged=unchanged, rate=rate
            )
        except AudienceChanged:
            # Nothing was taken either: the take waits for the audiences' check.
            drafts = drafts_prepare(items=read(False), now=now, aimed_at=aimed_at)
            written = drafts_write(drafts, only_new_key=only_new_key, rate=rate)
        if not written:
            return []
        created = drafts_published(drafts)
        if span.is_recording():
            merchants = {event.merchant_id for event in created}
            if len(merchants) == 1:
                span.set_attribute("relay.merchant_id", merchants.pop())
            span.set_attribute("relay.event_count", len(created))
            span.set_attribute(
                "relay.delivery_count", sum(len(d.deliveries) for d in drafts)
            )
            if len(created) == 1:
                span.set_attribute("relay.event_id", created[0].pk)
                span.set_attribute("relay.event_type", created[0].type)
    return created


def _costs(items: Items) -> dict[int, tuple[Merchant, int]]:
    costs: dict[int, tuple[Merchant, int]] = {}
    for audience, _ in items:
        merchant = audience.merchant
        costs[merchant.pk] = (merchant, costs.get(merchant.pk, (merchant, 0))[1] + 1)
    return costs


def drafts_prepare(
    *,
    items: Sequence[tuple[Audience, EventInput]],
    now: datetime,
    aimed_at: Collection[str] | None = None,
) -> list[Draft]:
    """Validate every event (one pass, all errors), then fan each one out.

    Raises MerchantSwitchedOff for the first event of a merchant staff
    switched off, then validation.EventsRefused naming each refused event by
    its index, and LimitExceeded past MAX_DELIVERIES_PER_REQUEST, before any
    fan-out.
    """
    for index, (audience, _) in enumerate(items):
        # Read afresh, or cached and checked by the write (endpoints.audiences
        # never serves a switched-off merchant from its cache).
        merchant_check_on(audience.merchant, index=index)
    errors: list[tuple[int, list, str]] = []
    texts: list[str] = []
    for index, (audience, item) in enumerate(items):
        problems, data_json = validation.event_check(
            merchant=audience.merchant,
            type=item.type,
            data=item.data,
            ordering_key=item.ordering_key,
        )
        errors.extend((index, loc, msg) for loc, msg in problems)
        texts.append(data_json)
    if errors:
        raise validation.EventsRefused(errors)
    subscribed = _subscriptions(items, aimed_at)
    _fan_out_bound(items, subscribed)
    targets = [
        fanout.receivers(
            type=item.type,
            data=item.data,
            endpoints=audience.endpoints,
            aimed_at=aimed_at,
            chosen=subscribed[id(audience), item.type],
        )
        for audience, item in items
    ]
    traceparent = current_traceparent()
    drafts = []
    event_ids = new_ids("evt", len(items))
    # One draw of randomness for the batch's ids (a system call each).
    delivery_ids = iter(new_ids("dlv", sum(map(len, targets))))
    for (audience, item), data_json, event_id, receivers in zip(
        items, texts, event_ids, targets, strict=True
    ):
        draft = _draft(
            audience,
            item,
            data_json,
            event_id=event_id,
            receivers=receivers,
            delivery_ids=delivery_ids,
            now=now,
        )
        draft.event.traceparent = traceparent
        drafts.append(draft)
    return drafts


def _subscriptions(
    items: Items, aimed_at: Collection[str] | None
) -> dict[tuple[int, str], list[Endpoint]]:
    """The endpoints subscribed to each (audience, type) of the request, each
    asked once: a batch is mostly a few types of a few merchants."""
    found: dict[tuple[int, str], list[Endpoint]] = {}
    for audience, item in items:
        key = (id(audience), item.type)
        if key not in found:
            found[key] = fanout.subscribed(
                type=item.type, endpoints=audience.endpoints, aimed_at=aimed_at
            )
    return found


def _fan_out_bound(
    items: Items, subscribed: dict[tuple[int, str], list[Endpoint]]
) -> None:
    """Raise LimitExceeded if the events x their subscribed endpoints pass
    MAX_DELIVERIES_PER_REQUEST. Counted before payload filters, so the limit
    bounds the filters' work as well as the rows written; and before any
    Delivery is built, so a refused request costs only this count."""
    limit = quotas.max_deliveries_per_request()
    total = sum(len(subscribed[id(a), item.type]) for a, item in items)
    if total <= limit:
        return
    raise LimitExceeded(
        setting="MAX_DELIVERIES_PER_REQUEST",
        limit=limit,
        detail=f"This request would fan out to {total} deliveries ({len(items)} "
        "events, each times the active endpoints subscribed to its type, before "
        f"payload filters); MAX_DELIVERIES_PER_REQUEST is {limit}. Send fewer "
        "events per request. Nothing was written.",
    )


def _draft(
    audience: Audience,
    item: EventInput,
    data_json: str,
    *,
    event_id: str,
    receivers: list[Endpoint],
    delivery_ids: Iterator[str],
    now: datetime,
) -> Draft:
    merchant = audience.merchant
    keyed = item.idempotency_key is not None
    event = rowsql.built(
        Event,
        {
            "id": event_id,
            "merchant_id": merchant.pk,
            "type": item.type,
            "data": item.data,
            "created_at": now,
            "ordering_key": item.ordering_key,
            "idempotency_key": item.idempotency_key,
            "idempotency_scope": item.idempotency_scope if keyed else "",
            "request_fingerprint": request_fingerprint(
                merchant=merchant.slug, type=item.type, data=item.data
            )
            if keyed
            else "",
        },
    )
    event.merchant = merchant
    deliveries = [
        rowsql.built(
            Delivery,
            {
                "id": delivery_id,
                "event_id": event_id,
                "endpoint_id": endpoint.pk,
                "merchant_id": merchant.pk,
                "next_attempt_at": now,
                "created_at": now,
                # The lane, on an ordered endpoint; its status and place are
                # given at the write, under the lane's lock (lanes.py).
                "ordering_key": item.ordering_key if endpoint.ordered else "",
            },
        )
        # delivery_ids runs on over the batch: this event takes its share.
        for endpoint, delivery_id in zip(receivers, delivery_ids, strict=False)
    ]
    return Draft(event, data_json, deliveries)


def drafts_published(drafts: Sequence[Draft]) -> list[Event]:
    """The written events, each carrying the deliveries it made (the API
    answers with them without another query)."""
    for draft in drafts:
        # In id order, as a stored event lists them (an idempotent replay).
        draft.event.created_deliveries = sorted(draft.deliveries, key=_pk)
    return [draft.event for draft in drafts]


def _pk(delivery: Delivery) -> str:
    return delivery.pk
