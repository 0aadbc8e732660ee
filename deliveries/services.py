"""Writes for events and deliveries: publish, replay, recover, and outcomes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F

from deliveries.dispatch import counters
from deliveries.models import Delivery, Event
from endpoints.models import Endpoint, Merchant
from endpoints.selectors import endpoints_subscribed
from relayproject.clock import utcnow
from relayproject.tracing import current_traceparent, tracer

NOTIFY_CHANNEL = "relay_deliveries"


@dataclass(frozen=True)
class EventInput:
    type: str
    data: object
    idempotency_key: str | None = None
    idempotency_scope: str = ""


def request_fingerprint(*, merchant: str, type: str, data: object) -> str:
    """Hash of what was asked, so a reused idempotency key can be told apart."""
    canonical = json.dumps(
        {"merchant": merchant, "type": type, "data": data},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def notify_dispatchers() -> None:
    """Wake idle dispatchers; PostgreSQL delivers a NOTIFY only on commit."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")


def event_publish(
    *,
    merchant: Merchant,
    type: str,
    data: object,
    idempotency_key: str | None = None,
    idempotency_scope: str = "",
    endpoint_ids: Sequence[str] | None = None,
    now: datetime | None = None,
) -> Event:
    """Store an event and one delivery per subscribed active endpoint, atomically.

    Runs inside the caller's transaction when there is one (a transactional
    outbox): the deliveries exist exactly when the caller's data does.
    endpoint_ids aims it at those active endpoints alone, whatever their
    event_types (a portal test event goes to one endpoint).
    """
    return events_publish(
        merchant=merchant,
        events=[EventInput(type, data, idempotency_key, idempotency_scope)],
        endpoint_ids=endpoint_ids,
        now=now,
    )[0]


def events_publish(
    *,
    merchant: Merchant,
    events: Sequence[EventInput],
    endpoint_ids: Sequence[str] | None = None,
    now: datetime | None = None,
) -> list[Event]:
    """Publish several events of one merchant in one transaction.

    The relay.publish span's W3C context is stored on each event, so the
    dispatcher's send spans can link back to the publishing trace.
    """
    with tracer.start_as_current_span("relay.publish") as span:
        created = _events_write(
            merchant=merchant, events=events, endpoint_ids=endpoint_ids, now=now
        )
        if span.is_recording():
            span.set_attribute("relay.merchant_id", merchant.pk)
            span.set_attribute("relay.event_count", len(created))
            span.set_attribute(
                "relay.delivery_count",
                sum(len(event.created_deliveries) for event in created),
            )
            if len(created) == 1:
                span.set_attribute("relay.event_id", created[0].pk)
                span.set_attribute("relay.event_type", created[0].type)
    return created


def _events_write(
    *,
    merchant: Merchant,
    events: Sequence[EventInput],
    endpoint_ids: Sequence[str] | None,
    now: datetime | None,
) -> list[Event]:
    now = now or utcnow()
    traceparent = current_traceparent()
    created: list[Event] = []
    deliveries: list[Delivery] = []
    endpoints_by_type: dict[str, list[Endpoint]] = {}
    with transaction.atomic():
        for item in events:
            if item.type not in endpoints_by_type:
                if endpoint_ids is None:
                    targets = endpoints_subscribed(
                        merchant_id=merchant.pk, event_type=item.type
                    )
                else:
                    # Aimed at named endpoints (a test event): sent whatever
                    # they subscribe to, but only if active and the merchant's.
                    targets = list(
                        Endpoint.objects.filter(
                            merchant=merchant, is_active=True, pk__in=endpoint_ids
                        )
                    )
                endpoints_by_type[item.type] = targets
            event = Event(
                merchant=merchant,
                type=item.type,
                data=item.data,
                created_at=now,
                traceparent=traceparent,
                idempotency_key=item.idempotency_key,
                idempotency_scope=item.idempotency_scope
                if item.idempotency_key
                else "",
                request_fingerprint=request_fingerprint(
                    merchant=merchant.slug, type=item.type, data=item.data
                )
                if item.idempotency_key
                else "",
            )
            created.append(event)
            deliveries.extend(
                Delivery(
                    event=event, endpoint=endpoint, next_attempt_at=now, created_at=now
                )
                for endpoint in endpoints_by_type[item.type]
            )
        Event.objects.bulk_create(created)
        Delivery.objects.bulk_create(deliveries)
        if deliveries:
            notify_dispatchers()
    by_event: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        by_event.setdefault(delivery.event_id, []).append(delivery)
    for event in created:
        # Saves the API a query: the response lists the deliveries just made.
        event.created_deliveries = by_event.get(event.pk, [])
    return created


class ReplayRefused(Exception):
    """The delivery is pending or in flight; only dead or succeeded ones replay."""


def delivery_replay(*, delivery_id: str, now: datetime | None = None) -> Delivery:
    """Dead or succeeded -> pending now, fresh attempt budget, history kept.

    The event id (webhook-id) is unchanged, so receivers can deduplicate.
    """
    now = now or utcnow()
    with (
        tracer.start_as_current_span(
            "relay.replay", attributes={"relay.delivery_id": delivery_id}
        ),
        transaction.atomic(),
    ):
        delivery = Delivery.objects.select_for_update(of=("self",)).get(pk=delivery_id)
        if delivery.status not in (Delivery.Status.DEAD, Delivery.Status.SUCCEEDED):
            raise ReplayRefused(f"delivery {delivery.pk} is {delivery.status}")
        delivery.status = Delivery.Status.PENDING
        delivery.budget_start = delivery.attempt_count
        delivery.next_attempt_at = now
        delivery.claimed_by = ""
        delivery.claimed_until = None
        delivery.dead_at = None
        delivery.save(
            update_fields=[
                "status",
                "budget_start",
                "next_attempt_at",
                "claimed_by",
                "claimed_until",
                "dead_at",
            ]
        )
        counters.counters_add(shard="web", tally={(counters.REPLAYED, ""): 1})
        notify_dispatchers()
    return delivery


def deliveries_recover(
    *,
    endpoint: Endpoint,
    since: datetime,
    until: datetime | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> int:
    """Dead deliveries of an endpoint created in [since, until) back to pending."""
    now = now or utcnow()
    dead = Delivery.objects.filter(
        endpoint=endpoint, status=Delivery.Status.DEAD, created_at__gte=since
    )
    if until is not None:
        dead = dead.filter(created_at__lt=until)
    if dry_run:
        return dead.count()
    with (
        tracer.start_as_current_span(
            "relay.recover", attributes={"relay.endpoint_id": endpoint.pk}
        ) as span,
        transaction.atomic(),
    ):
        count = dead.update(
            status=Delivery.Status.PENDING,
            budget_start=F("attempt_count"),
            next_attempt_at=now,
            dead_at=None,
        )
        if count:
            counters.counters_add(shard="web", tally={(counters.REPLAYED, ""): count})
            notify_dispatchers()
        span.set_attribute("relay.recovered", count)
    return count
