"""Endpoints with a history of attempts at chosen times, and an operational
endpoint to hear what the relay says."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from deliveries.models import Attempt, Delivery, Event
from deliveries.notifications.models import MaintenanceSlot
from deliveries.notifications.operational import operational_merchant
from deliveries.services import event_publish
from endpoints.models import Endpoint, EndpointHealth
from tests.support import factories

T0 = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fresh_slots(db, settings):
    # The migration marks "now" as already seen; tests run on their own clock.
    MaintenanceSlot.objects.all().delete()
    settings.AUTO_DISABLE_AFTER_HOURS = 120
    settings.AUTO_DISABLE_MIN_FAILURES = 20
    settings.NOTIFY_EMAIL_MIN_INTERVAL_HOURS = 24
    settings.OPERATIONAL_COALESCE_SECONDS = 60
    settings.OPERATIONAL_CHECK_SECONDS = 60


def hours(n: float) -> timedelta:
    return timedelta(hours=n)


def attempt(
    endpoint: Endpoint, at: datetime, *, ok: bool = False, status: int = 500
) -> Attempt:
    """One recorded attempt at `at`, with the health row moved as outcomes would."""
    event = event_publish(
        merchant=endpoint.merchant,
        type="order.paid",
        data={"at": at.isoformat()},
        endpoint_ids=[endpoint.pk],
        now=at,
    )
    delivery = event.created_deliveries[0]
    row = Attempt.objects.create(
        delivery=delivery,
        endpoint=endpoint,
        number=1,
        started_at=at,
        status_code=200 if ok else status,
        error_kind="" if ok else "http_status",
        outcome=Attempt.Outcome.SUCCEEDED if ok else Attempt.Outcome.RETRY,
    )
    Delivery.objects.filter(pk=delivery.pk).update(
        attempt_count=1,
        status=Delivery.Status.SUCCEEDED if ok else Delivery.Status.PENDING,
        next_attempt_at=at + hours(1),
    )
    field = "last_success_at" if ok else "last_failure_at"
    EndpointHealth.objects.filter(pk=endpoint.pk).update(**{field: at})
    return row


def failures(endpoint: Endpoint, *, start: datetime, end: datetime, count: int) -> None:
    """count failed attempts spread evenly from start to end (both included)."""
    step = (end - start) / max(count - 1, 1)
    for n in range(count):
        attempt(endpoint, start + step * n)


def token_in(message) -> str:
    """The token of the confirmation link in an address confirmation email."""
    return re.search(r"/portal/link/([^/\s]+)/confirm-address/", message.body)[1]


def said(event_type: str | None = None) -> list[Event]:
    """Operational events published so far, oldest first."""
    events = Event.objects.filter(
        merchant__slug="relay.operational", type__startswith="relay."
    ).order_by("created_at", "pk")
    if event_type:
        events = events.filter(type=event_type)
    return list(events)


@pytest.fixture
def merchant(db):
    return factories.merchant("acme")


@pytest.fixture
def endpoint(merchant):
    return factories.endpoint(merchant, url="http://127.0.0.1:9/acme")


@pytest.fixture
def ops_endpoint(db):
    """The platform's operational endpoint, subscribed to everything relay.*."""
    return factories.endpoint(operational_merchant(), url="http://127.0.0.1:9/ops")
