"""Every way an endpoint is disabled goes through endpoints_disable: the same
log line, the same columns, and the same relay.endpoint.disabled event.

The five paths: a 410 from the receiver (the dispatcher), auto-disable (the
endpoint check), the admin action, the portal's toggle and the API's PATCH.
"""

from __future__ import annotations

import logging
import random

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.transport import SendResult
from deliveries.models import Event
from deliveries.notifications import policy
from deliveries.notifications.models import MaintenanceSlot
from deliveries.notifications.operational import (
    ENDPOINT_DISABLED,
    operational_merchant,
)
from deliveries.notifications.watch import watch_run
from deliveries.services import event_publish
from endpoints.models import Endpoint, Membership
from endpoints.services import endpoints_disable
from tests.deliveries.notifications.conftest import T0, failures, hours
from tests.support import factories
from tests.support.api import api_as
from tests.support.fakes import FakeClock, ScriptedSender
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLDS = policy.Thresholds(window=hours(120), min_failures=20)


def by_410(endpoint: Endpoint) -> None:
    clock = FakeClock()
    event_publish(merchant=endpoint.merchant, type="a", data={}, now=clock.now())
    worker = Dispatcher(
        worker_id="w",
        sender=ScriptedSender(SendResult(status_code=410, duration_ms=1.0)),
        batch_size=10,
        concurrency=1,
        lease_seconds=60,
        clock=clock,
        rand=random.Random(1),
    )
    worker.run_once()
    worker.close()


def by_auto_disable(endpoint: Endpoint) -> None:
    failures(endpoint, start=T0, end=T0 + hours(20), count=20)
    watch_run(now=T0 + hours(120), t=THRESHOLDS)


def by_admin(endpoint: Endpoint) -> None:
    client = Client()
    client.force_login(User.objects.create_superuser("sam", password="x"))
    client.post(
        reverse("admin:endpoints_endpoint_changelist"),
        {"action": "disable_endpoint", "_selected_action": [endpoint.pk]},
    )


def by_portal(endpoint: Endpoint) -> None:
    client = Client()
    client.force_login(
        user_with_role(endpoint.merchant, Membership.Role.OWNER, "olivia")
    )
    client.post(
        reverse("portal:endpoint_toggle", args=[endpoint.merchant.slug, endpoint.pk])
    )


def by_api(endpoint: Endpoint) -> None:
    api = api_as(endpoint.merchant)
    response = api.call(
        "PATCH",
        f"/merchants/{endpoint.merchant.slug}/endpoints/{endpoint.pk}",
        {"is_active": False},
    )
    assert response.status_code == 200, response.content


PATHS = {
    "410": (by_410, "receiver", ""),
    "auto-disable": (by_auto_disable, "auto-disable", ""),
    "admin": (by_admin, "staff", "sam"),
    "portal": (by_portal, "merchant", "olivia"),
    "api": (by_api, "api", "test"),
}


@pytest.fixture
def endpoint(db, settings):
    MaintenanceSlot.objects.all().delete()
    settings.OPERATIONAL_COALESCE_SECONDS = 0
    # The operational endpoint hears the relay's events.
    factories.endpoint(operational_merchant(), url="http://127.0.0.1:9/ops")
    return factories.endpoint(factories.merchant("acme"), url="http://127.0.0.1:9/a")


@pytest.mark.parametrize("path", PATHS)
def test_each_way_to_disable_logs_writes_and_announces_alike(endpoint, path, caplog):
    disable, kind, actor = PATHS[path]
    with caplog.at_level(logging.INFO, logger="endpoints.services"):
        disable(endpoint)
    endpoint.refresh_from_db()
    assert not endpoint.is_active
    assert endpoint.disabled_at is not None and endpoint.disabled_reason
    assert endpoint.disabled_by.partition(":")[0] == kind
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "endpoints.services" and r.getMessage().startswith("endpoint ")
    ]
    assert lines == [
        f"endpoint disabled endpoint={endpoint.pk} by={endpoint.disabled_by} "
        f"reason={endpoint.disabled_reason}"
    ]

    watch_run(now=endpoint.disabled_at + hours(1), t=THRESHOLDS)
    (event,) = Event.objects.filter(type=ENDPOINT_DISABLED)
    assert event.data["endpoint"]["id"] == endpoint.pk
    assert event.data["by"] == kind
    assert event.data["actor"] == actor
    assert event.data["reason"] == endpoint.disabled_reason


def test_a_disable_does_not_overwrite_an_earlier_one(endpoint):
    assert endpoints_disable(endpoint_ids=[endpoint.pk], reason="first", by="api")
    assert not endpoints_disable(endpoint_ids=[endpoint.pk], reason="2nd", by="api")
    endpoint.refresh_from_db()
    assert endpoint.disabled_reason == "first"
