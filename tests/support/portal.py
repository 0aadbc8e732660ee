"""The portal's world: two merchants with an endpoint and a dead delivery each,
and users with roles (the `world` fixture in tests/relayproject/portal/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User

from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import Endpoint, Membership, Merchant
from relayproject.lib.clock import utcnow

PASSWORD = "correct horse battery staple"


def user_with_role(merchant: Merchant, role: str, username: str) -> User:
    user = User.objects.create_user(username=username, password=PASSWORD)
    Membership.objects.create(user=user, merchant=merchant, role=role)
    return user


def dead_delivery(endpoint: Endpoint, *, type: str = "order.paid") -> Delivery:
    """A delivery whose one attempt got a 500 and ran out of attempts."""
    event = event_publish(
        merchant=endpoint.merchant, type=type, data={"n": 1}, endpoint_ids=[endpoint.pk]
    )
    delivery = event.created_deliveries[0]
    now = utcnow()
    Attempt.objects.create(
        delivery=delivery,
        endpoint=endpoint,
        number=1,
        started_at=now,
        response_ms=12.0,
        status_code=500,
        error_kind="http_status",
        error_message="HTTP 500",
        response_body="boom",
        outcome=Attempt.Outcome.DEAD,
        # As the dispatcher records it (deliveries/dispatch/sendloop.py).
        request_url=endpoint.url,
        request_headers=[
            ["Content-Type", "application/json"],
            ["webhook-id", event.pk],
            ["webhook-signature", "redacted, hmac 0badc0de"],
            ["X-Relay-Attempt", "1"],
        ],
        response_headers=[["Content-Type", "text/plain"]],
    )
    Delivery.objects.filter(pk=delivery.pk).update(
        status=Delivery.Status.DEAD,
        attempt_count=1,
        last_status_code=500,
        last_error="HTTP 500",
        dead_at=now,
    )
    delivery.refresh_from_db()
    return delivery


@dataclass
class Side:
    merchant: Merchant
    endpoint: Endpoint
    delivery: Delivery

    def kwargs(self, names) -> dict[str, str]:
        values = {
            "slug": self.merchant.slug,
            "endpoint_id": self.endpoint.pk,
            "delivery_id": self.delivery.pk,
        }
        return {name: values[name] for name in names}


@dataclass
class World:
    mine: Side
    theirs: Side
    owner: User
    viewer: User
