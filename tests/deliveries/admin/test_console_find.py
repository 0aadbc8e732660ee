"""Staff find an endpoint as they name it: by merchant slug or description;
its URL keeps its host; the dead-letter analysis of one endpoint is of that
endpoint; the relay's own merchant is marked in the filters; the two
latency figures say what they measure."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from deliveries.notifications.operational import (
    OPERATIONAL_MERCHANT_SLUG,
    operational_merchant,
)
from endpoints.admin.present import RELAY_OWN, middle_cut
from relayproject.lib.clock import utcnow
from tests.support import factories, seed

pytestmark = pytest.mark.django_db


def found(client, changelist: str, q: str) -> str:
    return client.get(reverse(f"admin:{changelist}"), {"q": q}).content.decode()


def test_staff_find_an_endpoint_by_merchant_slug_and_by_description(admin_client):
    acme = factories.merchant("acme-payments")
    orders = factories.endpoint(
        acme, url="http://127.0.0.1:9/a", description="Orders service, EU"
    )
    other = factories.endpoint(url="http://127.0.0.1:9/b", description="Billing")
    now = utcnow()
    mine = seed.delivery(orders, status="dead", created_at=now, dead_at=now)
    theirs = seed.delivery(other, status="dead", created_at=now, dead_at=now)
    for changelist in (
        "endpoints_endpoint_changelist",
        "endpoints_endpointhealth_changelist",
    ):
        for q in ("acme-pay", "orders service"):
            page = found(admin_client, changelist, q)
            assert orders.pk in page and other.pk not in page, (changelist, q)
    for q in ("acme-payments", "Orders service"):
        page = found(admin_client, "deliveries_delivery_changelist", q)
        assert mine.pk in page and theirs.pk not in page, q
    assert "Orders service, EU" in found(
        admin_client, "endpoints_endpoint_changelist", ""
    )


def test_a_cut_url_keeps_its_host_whole():
    url = "https://hooks.merchant-with-a-long-name.example/webhooks/v2/incoming/orders"
    shown = middle_cut(url)
    assert shown.startswith("https://hooks.merchant-with-a-long-name.example/")
    assert shown.endswith("incoming/orders") and "…" in shown


def test_the_dead_letter_analysis_of_one_endpoint_lists_that_endpoint(admin_client):
    one, two = factories.endpoint(), factories.endpoint()
    now = utcnow()
    for endpoint in (one, two):
        seed.delivery(
            endpoint,
            status="dead",
            created_at=now - timedelta(minutes=1),
            dead_at=now,
            last_status_code=404,
            last_error="http 404",
        )
    url = reverse("admin:deliveries_deadletter_changelist")
    everyone = admin_client.get(url).content.decode()
    assert everyone.count("Replay all dead for this endpoint") == 2
    page = admin_client.get(url, {"endpoint__id__exact": one.pk}).content.decode()
    analysis = page.split('id="dead-letter-analysis"')[1].split("</table>")[0]
    assert one.pk in analysis and two.pk not in analysis
    assert "HTTP 404 Not Found (1)" in analysis and "http 404" not in analysis
    # Another window keeps the endpoint chosen.
    assert f"endpoint__id__exact={one.pk}&amp;window=7d" in page


def test_the_relays_own_merchant_is_marked_in_the_filters(admin_client):
    own = operational_merchant()
    factories.endpoint(own, url="http://127.0.0.1:9/ops")
    factories.endpoint(factories.merchant("acme"), url="http://127.0.0.1:9/acme")
    for changelist in (
        "endpoints_endpoint_changelist",
        "deliveries_delivery_changelist",
        "deliveries_event_changelist",
    ):
        page = admin_client.get(reverse(f"admin:{changelist}")).content.decode()
        assert f"{OPERATIONAL_MERCHANT_SLUG}{RELAY_OWN}".replace("'", "&#x27;") in page
        assert f"acme{RELAY_OWN}".replace("'", "&#x27;") not in page


def test_the_two_latencies_are_named_for_what_they_measure(admin_client):
    endpoint = factories.endpoint()
    pipeline = admin_client.get(reverse("admin:deliveries_pipeline")).content.decode()
    assert "Publish to delivery, last 24 h" in pipeline
    assert "receiver response time p95" in pipeline
    health = admin_client.get(
        reverse("admin:endpoints_endpointhealth_changelist")
    ).content.decode()
    assert "Response<br>p95 ms" in health
    page = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    ).content.decode()
    assert "receiver response time p50" in page
