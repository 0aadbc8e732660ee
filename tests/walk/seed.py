"""A relay with something on every page: the data the layout walk looks at.

Long URLs (two endpoints on one host that differ only at the end), a 220 KB
event body, dead, pending and held deliveries, a catalogue with groups,
descriptions and a deprecated type, saved notification addresses, keys,
heartbeats, and a user who belongs to two merchants (so the switcher shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.test import override_settings

from deliveries.dispatch.heartbeat import heartbeat_touch
from deliveries.models import Attempt, Delivery, ErrorKind, Event
from deliveries.notifications.services import notification_settings_update
from endpoints.models import ApiKey, EndpointHealth, EventType, Membership
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from relayproject.lib.ids import new_id
from tests.support import factories, seed

PASSWORD = "walk-the-pages-password"
HOST = "http://127.0.0.1:9/hooks.example-merchant-with-a-long-name/webhooks/v2/incoming"
BIG_BODY_BYTES = 220 * 1024
CATALOGUE = {
    "payment.captured": "A payment was captured and the money is on its way.",
    "payment.refunded": "Part or all of a captured payment went back to the buyer.",
    "payment.authorization_expired": "An authorisation lapsed before capture.",
    "order.fulfillment_partially_shipped": "Some of an order's items shipped.",
    "order.created": "",
}


# Broker hosts the walk's broker endpoint may use: the walk sets
# RELAY_BROKER_HOSTS to these so the endpoint form offers every kind.
BROKER_HOSTS = ["127.0.0.1:5672"]
BROKER_ANSWER = (
    "publisher confirm: ack (exchange 'merchant-events-with-a-long-name', "
    "routing key 'orders.fulfillment_partially_shipped.eu-west')"
)


@dataclass
class Walk:
    user: User
    slug: str
    endpoint_id: str
    delivery_id: str
    big_delivery_id: str
    ids: dict[str, str]
    # The broker endpoint and its deliveries (one acknowledged, one dead).
    broker: dict[str, str]


def big_data() -> dict:
    """An order with enough line items to make the body about 220 KB."""
    item = {"sku": "SKU-0000000", "name": "Replacement filter cartridge", "qty": 1}
    items = []
    size = 0
    while size < BIG_BODY_BYTES:
        items.append({**item, "sku": f"SKU-{len(items):07d}"})
        size += 75
    return {"order": "ord_1", "items": items}


def relay() -> Walk:
    now = utcnow()
    acme = factories.merchant("acme-industries-international")
    other = factories.merchant("globex")
    user = User.objects.create_superuser("walker", "walker@example.com", PASSWORD)
    Membership.objects.create(user=user, merchant=acme, role=Membership.Role.OWNER)
    Membership.objects.create(user=user, merchant=other, role=Membership.Role.OWNER)
    for name, description in CATALOGUE.items():
        EventType.objects.update_or_create(
            name=name,
            defaults={
                "description": description,
                "example": {"id": "pay_1", "amount": 1250},
                "deprecated": name == "payment.authorization_expired",
            },
        )
    endpoints = [
        factories.endpoint(
            acme,
            url=f"{HOST}/orders-{n}",
            description=f"Orders service, region {n}",
            event_types=["payment.captured", "order.fulfillment_partially_shipped"],
        )
        for n in range(3)
    ]
    factories.endpoint(other, url="http://127.0.0.1:9/globex")
    for i, endpoint in enumerate(endpoints):
        EndpointHealth.objects.filter(pk=endpoint.pk).update(
            p50_ms=120.4 + i * 311.7,
            p95_ms=2504.7 - i * 97.3,
            p99_ms=4011.4 + i,
            sample_count=1500 + i,
            success_rate=1.0 - i * 0.21,
            is_slow=i == 0,
        )
    endpoint_breaker_open(
        endpoint_id=endpoints[1].pk,
        reason="10 consecutive failures (last: http 503)",
        now=now,
    )
    endpoint_disable(endpoint=endpoints[2], reason="410 Gone from the receiver")
    rows = []
    for n, status in enumerate(("dead", "pending", "succeeded", "dead", "pending")):
        rows.append(
            seed.delivery(
                endpoints[n % 2],
                status=status,
                created_at=now - timedelta(minutes=n + 1),
                attempts=3,
                with_attempts=True,
                last_status_code=503,
                last_error="HTTPSConnectionPool: read timed out after 10 s",
                succeeded_at=now if status == "succeeded" else None,
                dead_at=now if status == "dead" else None,
            )
        )
    big_event = Event.objects.create(
        id=new_id("evt", at=now),
        merchant=acme,
        type="order.fulfillment_partially_shipped",
        data=big_data(),
        created_at=now,
    )
    big = seed.delivery(
        endpoints[0],
        status="dead",
        created_at=now,
        attempts=2,
        with_attempts=True,
        last_status_code=500,
        last_error="HTTP 500",
        dead_at=now,
        event=big_event,
    )
    notification_settings_update(
        merchant=acme,
        email_failing=True,
        email_disabled=True,
        email_enabled=False,
        extra_emails=["oncall@acme.example", "payments-team@acme.example"],
    )
    for i in range(3):
        ApiKey.objects.create(
            name=f"billing-service-production-key-{i}",
            merchant=acme if i % 2 else None,
            prefix=f"rk_{i:05d}",
            key_hash=f"{i:064x}",
            last_used_at=now,
        )
    heartbeat_touch(worker_id="dispatch-host-a-4242", started_at=now, now=now)
    assert Delivery.objects.filter(pk=big.pk).exists()
    broker = broker_rows(acme, now=now)
    return Walk(
        user=user,
        slug=acme.slug,
        endpoint_id=endpoints[0].pk,
        delivery_id=rows[0].pk,
        big_delivery_id=big.pk,
        ids={"evt": big_event.pk, "dlv": big.pk, "ep": endpoints[0].pk},
        broker=broker,
    )


def broker_rows(merchant, *, now) -> dict[str, str]:
    """A RabbitMQ endpoint with a long target, one delivery the broker
    acknowledged and one that died unroutable."""
    with override_settings(RELAY_BROKER_HOSTS=BROKER_HOSTS):
        endpoint = factories.endpoint(
            merchant,
            kind="rabbitmq",
            url="amqp://walker:walk-broker-pw@127.0.0.1:5672/merchant-vhost",
            target={
                "exchange": "merchant-events-with-a-long-name",
                "routing_key": "orders.fulfillment_partially_shipped.eu-west",
            },
        )
    ids = {"endpoint_id": endpoint.pk}
    for status, error_kind, said in (
        ("succeeded", "", ""),
        (
            "dead",
            ErrorKind.BROKER_REFUSED,
            "RabbitMQ returned the message: NO_ROUTE (exchange 'merchant-events-with-a-long-name', "
            "routing key 'orders.fulfillment_partially_shipped.eu-west')",
        ),
    ):
        row = seed.delivery(
            endpoint,
            status=status,
            created_at=now,
            attempts=1,
            last_error=f"{error_kind}: {said}" if said else "",
            succeeded_at=now if status == "succeeded" else None,
            dead_at=now if status == "dead" else None,
        )
        Attempt.objects.create(
            delivery=row,
            endpoint=endpoint,
            number=1,
            started_at=now,
            response_ms=3.2,
            status_code=None,
            error_kind=error_kind,
            error_message=said,
            response_body="" if said else BROKER_ANSWER,
            outcome=status,
            request_url=endpoint.url,
            request_headers=[["webhook-id", row.event_id], ["X-Relay-Attempt", "1"]],
        )
        ids[status] = row.pk
    return ids
