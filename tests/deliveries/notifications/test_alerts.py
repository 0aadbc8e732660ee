"""Pipeline health's lines for failing endpoints and, loudly, for the
operational endpoints' own health."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.notifications.selectors import failure_alerts
from endpoints.services import endpoint_disable
from tests.deliveries.notifications.conftest import T0, attempt, hours

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def test_a_failing_endpoint_with_a_closed_breaker_has_a_line(endpoint):
    attempt(endpoint, T0, ok=True)
    attempt(endpoint, T0 + hours(1))
    (alert,) = failure_alerts(now=T0 + hours(2))
    assert alert.kind == "endpoint_failing"
    assert endpoint.pk in alert.text
    assert "last success 2026-12-01 00:00 UTC" in alert.text


def test_an_endpoint_that_never_succeeded_says_so(endpoint):
    attempt(endpoint, T0)
    (alert,) = failure_alerts(now=T0 + hours(1))
    assert alert.text.endswith(", it has never succeeded.")
    assert "since ever" not in alert.text


def test_a_dead_or_disabled_operational_endpoint_is_said_loudly(ops_endpoint):
    delivery = attempt(ops_endpoint, T0, status=400).delivery
    Delivery.objects.filter(pk=delivery.pk).update(status="dead", dead_at=T0)
    endpoint_disable(endpoint=ops_endpoint, reason="by hand", by="staff:sam", now=T0)
    texts = [a.text for a in failure_alerts(now=T0 + hours(1))]
    assert texts[0].startswith("OPERATIONAL ENDPOINT DISABLED")
    assert texts[1].startswith("OPERATIONAL EVENTS DEAD-LETTERED: 1")


def test_pipeline_page_shows_the_operational_line(admin_client, ops_endpoint):
    endpoint_disable(endpoint=ops_endpoint, reason="by hand", by="staff:sam")
    page = admin_client.get(reverse("admin:deliveries_pipeline")).content.decode()
    assert "OPERATIONAL ENDPOINT DISABLED" in page
