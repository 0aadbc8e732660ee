"""A page of each face on Citus: the API's delivery list, the portal's
delivery list and detail (publish -> receipt through a real dispatcher
run), and the admin's delivery changelist."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.services import EventInput, events_publish
from endpoints.models import Membership
from tests.support import factories
from tests.support.api import api_as
from tests.support.portal import user_with_role

pytestmark = [pytest.mark.citus, pytest.mark.django_db(transaction=True)]


def _published(merchant, url, events=3):
    endpoint = factories.endpoint(merchant, url=url)
    events_publish(
        merchant=merchant,
        events=[EventInput("order.paid", {"n": n}) for n in range(events)],
    )
    return endpoint


def test_the_api_lists_a_merchants_deliveries(distributed):
    acme, globex = factories.merchant("acme"), factories.merchant("globex")
    _published(acme, "http://127.0.0.1:9/a")
    _published(globex, "http://127.0.0.1:9/g")

    response = api_as(acme).get("/deliveries")

    assert response.status_code == 200, response.content
    ids = {row["id"] for row in response.json()["items"]}
    assert ids == set(
        Delivery.objects.filter(merchant_id=acme.pk).values_list("id", flat=True)
    )


def test_publish_to_receipt_and_the_portal_shows_the_delivery(
    distributed, client, receiver
):
    merchant = factories.merchant("acme")
    endpoint = _published(merchant, receiver.url, events=2)
    owner = user_with_role(merchant, Membership.Role.OWNER, "owner")

    call_command("run_dispatcher", "--drain")

    assert len(receiver.wait_for(2)) == 2
    delivery = Delivery.objects.filter(endpoint=endpoint).first()
    assert delivery.status == "succeeded"
    client.force_login(owner)
    listing = client.get(reverse("portal:delivery_list", args=[merchant.slug]))
    assert listing.status_code == 200
    assert delivery.pk in listing.content.decode()
    detail = client.get(
        reverse("portal:delivery_detail", args=[merchant.slug, delivery.pk])
    )
    assert detail.status_code == 200
    assert "webhook-id" in detail.content.decode()


def test_the_admin_lists_every_merchants_deliveries(distributed, admin_client):
    for slug in ("acme", "globex"):
        _published(factories.merchant(slug), "http://127.0.0.1:9/x")

    html = admin_client.get(reverse("admin:deliveries_delivery_changelist"))

    assert html.status_code == 200
    for pk in Delivery.objects.values_list("pk", flat=True):
        assert pk in html.content.decode()
