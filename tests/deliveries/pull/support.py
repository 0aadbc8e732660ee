"""Pull endpoints and listen sessions for the tests of deliveries/pull."""

from __future__ import annotations

from datetime import datetime

from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from endpoints import brokers
from endpoints.models import Endpoint, Merchant
from endpoints.services import endpoint_create
from relayproject.lib.clock import utcnow
from tests.support import factories

VISIBILITY = 30  # seconds: each pull endpoint's visibility timeout here


def pull_endpoint(merchant: Merchant | None = None, **kwargs) -> Endpoint:
    endpoint = endpoint_create(
        merchant=merchant or factories.merchant(),
        url="",
        kind=brokers.PULL,
        now=utcnow(),
        **kwargs,
    )
    Endpoint.objects.filter(pk=endpoint.pk).update(
        visibility_timeout_seconds=VISIBILITY
    )
    return Endpoint.objects.select_related("merchant").get(pk=endpoint.pk)


def publish(
    endpoint: Endpoint, count: int, *, key: str = "", now: datetime | None = None
) -> list[str]:
    """`count` events of the endpoint's merchant; its deliveries' ids, oldest
    first (within one publish, a lane's in its order)."""
    events_publish(
        merchant=endpoint.merchant,
        events=[
            EventInput("order.paid", {"n": n}, ordering_key=key) for n in range(count)
        ],
        now=now,
    )
    return list(
        Delivery.objects.filter(endpoint=endpoint)
        .order_by("created_at", "lane_seq", "pk")
        .values_list("pk", flat=True)
    )


def statuses(endpoint: Endpoint) -> dict[str, str]:
    return dict(Delivery.objects.filter(endpoint=endpoint).values_list("pk", "status"))
