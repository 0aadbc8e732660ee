"""The demo `make run` seeds (`manage.py seed_demo`): every screen has
something to show.

A merchant with three endpoints: the demo receiver (relayproject/demo.py), an
ordered one beside it, and one that fails (nothing listens on loopback port 9)
with a few dead letters, seeded as the dispatcher records them, and one
delivery left for the dispatcher to fail for real; and an event
catalogue whose types have schemas and examples. Idempotent: a second run
adds nothing but a fresh API key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse

from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints import catalogue
from endpoints.apikeys import apikey_create
from endpoints.models import Endpoint, EventType, Membership, Merchant
from endpoints.services import endpoint_create

STAFF = ("admin", "admin-demo-password")
MERCHANT_USER = ("merchant", "merchant-demo-password")
MERCHANT_SLUG = "acme"
# Port 9 (discard) on loopback: nothing listens there, so every send fails.
FAILING_URL = "http://127.0.0.1:9/webhooks"
ORDER = {
    "type": "object",
    "required": ["order"],
    "properties": {
        "order": {
            "type": "object",
            "required": ["id", "amount"],
            "properties": {
                "id": {"type": "integer"},
                "amount": {"type": "integer", "description": "in cents"},
                "currency": {"type": "string", "minLength": 3, "maxLength": 3},
            },
        }
    },
}
CUSTOMER = {
    "type": "object",
    "required": ["customer"],
    "properties": {
        "customer": {
            "type": "object",
            "required": ["id", "email"],
            "properties": {
                "id": {"type": "string"},
                "email": {"type": "string"},
            },
        }
    },
}
CATALOGUE = [
    (
        "order.paid",
        "A customer paid for an order.",
        ORDER,
        {"order": {"id": 8812, "amount": 1999, "currency": "EUR"}},
    ),
    (
        "order.refunded",
        "An order was refunded, in full or in part.",
        ORDER,
        {"order": {"id": 8812, "amount": 500, "currency": "EUR"}},
    ),
    (
        "customer.created",
        "A customer signed up.",
        CUSTOMER,
        {"customer": {"id": "cus_4711", "email": "ada@example.com"}},
    ),
]
DEAD_LETTERS = 3


@dataclass(frozen=True)
class Demo:
    merchant: Merchant
    receiver: Endpoint
    api_key: str  # shown once


def demo_seed(*, base_url: str, now: datetime) -> Demo:
    """Create what is missing of the demo; a new platform API key each time."""
    base = base_url.rstrip("/")
    _users()
    merchant, _created = Merchant.objects.get_or_create(
        slug=MERCHANT_SLUG, defaults={"name": "Acme Payments (demo)"}
    )
    Membership.objects.get_or_create(
        user=get_user_model().objects.get(username=MERCHANT_USER[0]),
        merchant=merchant,
        defaults={"role": Membership.Role.OWNER},
    )
    for name, description, schema, example in CATALOGUE:
        if not EventType.objects.filter(name=name).exists():
            catalogue.event_type_create(
                name=name, description=description, schema=schema, example=example
            )
    receiver = _demo_endpoint(merchant, base, "demo receiver", now=now)
    _demo_endpoint(merchant, base, "orders, in order", ordered=True, now=now)
    failing = merchant.endpoints.filter(url=FAILING_URL).first()
    if failing is None:
        failing = endpoint_create(
            merchant=merchant,
            url=FAILING_URL,
            description="billing (fails: nothing listens on port 9)",
            event_types=["customer.*"],
            max_attempts=1,
            now=now,
        )
    if not Delivery.objects.filter(
        endpoint=failing, status=Delivery.Status.DEAD
    ).exists():
        _dead_letters(failing, now=now)
        # And one the dispatcher of `make run` tries for real: its failure
        # is what the endpoint's health and the portal's banner show.
        event_publish(
            merchant=merchant,
            type="customer.created",
            data={"customer": {"id": "cus_4799", "email": "grace@example.com"}},
            endpoint_ids=[failing.pk],
            now=now,
        )
    _key, raw_key = apikey_create(name="demo (make run)", merchant=None)
    return Demo(merchant=merchant, receiver=receiver, api_key=raw_key)


def _users() -> None:
    users = get_user_model()
    if not users.objects.filter(username=STAFF[0]).exists():
        users.objects.create_superuser(STAFF[0], "admin@example.com", STAFF[1])
    if not users.objects.filter(username=MERCHANT_USER[0]).exists():
        users.objects.create_user(
            MERCHANT_USER[0], "merchant@example.com", MERCHANT_USER[1]
        )


def _demo_endpoint(
    merchant: Merchant,
    base: str,
    description: str,
    *,
    ordered: bool = False,
    now: datetime,
) -> Endpoint:
    """An endpoint on the demo receiver, whose URL names the endpoint's own id."""
    existing = merchant.endpoints.filter(description=description).first()
    if existing is not None:
        return existing
    placeholder = reverse("demo-receiver", kwargs={"endpoint_id": "new"})
    endpoint = endpoint_create(
        merchant=merchant,
        url=base + placeholder,
        description=description,
        event_types=["order.*"] if ordered else [],
        ordered=ordered,
        now=now,
    )
    path = reverse("demo-receiver", kwargs={"endpoint_id": endpoint.pk})
    endpoint.url = base + path
    endpoint.save(update_fields=["url"])
    return endpoint


@transaction.atomic
def _dead_letters(endpoint: Endpoint, *, now: datetime) -> None:
    """Deliveries that ran out of attempts, recorded as the dispatcher would."""
    for n in range(DEAD_LETTERS):
        at = now - timedelta(minutes=10 * (DEAD_LETTERS - n))
        event = event_publish(
            merchant=endpoint.merchant,
            type="customer.created",
            data={"customer": {"id": f"cus_{4711 + n}", "email": "ada@example.com"}},
            endpoint_ids=[endpoint.pk],
            now=at,
        )
        delivery = event.created_deliveries[0]
        message = "Connection refused (127.0.0.1:9)"  # as the sender says it
        Attempt.objects.create(
            delivery=delivery,
            endpoint=endpoint,
            number=1,
            started_at=at,
            response_ms=1.0,
            error_kind="connection_error",
            error_message=message,
            outcome=Attempt.Outcome.DEAD,
            request_url=endpoint.url,
            request_headers=[
                ["Content-Type", "application/json"],
                ["webhook-id", event.pk],
            ],
        )
        Delivery.objects.filter(pk=delivery.pk).update(
            status=Delivery.Status.DEAD,
            attempt_count=1,
            last_error=message,
            dead_at=at,
        )
