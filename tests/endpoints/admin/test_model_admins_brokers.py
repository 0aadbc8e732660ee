"""Broker endpoints in the staff console: the endpoint page and list show the
kind, target and broker URL as the API answers it (the password as ***), and
whether credentials are set, never the password; staff edit a merchant's
broker host list, checked beside the field."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints.models import Merchant
from tests.support import factories

pytestmark = pytest.mark.django_db

PASSWORD = "Plum-Quokka-7731-zebra"


def change_merchant(admin_client, merchant: Merchant, **fields):
    data = {
        "slug": merchant.slug,
        "name": merchant.name,
        "is_active": "on",
        "membership_set-TOTAL_FORMS": "0",
        "membership_set-INITIAL_FORMS": "0",
        **fields,
    }
    url = reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    return admin_client.post(url, data)


def test_the_endpoint_page_shows_the_broker_its_password_masked(admin_client, settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    endpoint = factories.endpoint(
        kind="rabbitmq",
        url=f"amqp://relay:{PASSWORD}@127.0.0.1:5672/orders",
        target={"exchange": "shop", "routing_key": "orders.paid"},
    )

    page = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    )
    listing = admin_client.get(reverse("admin:endpoints_endpoint_changelist"))

    html = page.content.decode()
    assert page.status_code == 200
    assert "RabbitMQ exchange" in html
    assert "amqp://relay:***@127.0.0.1:5672/orders" in html
    assert "exchange: &#x27;shop&#x27;; routing_key: &#x27;orders.paid&#x27;" in html
    assert "set (write-only: the URL shows the password as ***)" in html
    # The list cuts the URL into pieces; its whole is the hover title.
    assert 'title="amqp://relay:***@127.0.0.1:5672/orders"' in listing.content.decode()
    for response in (page, listing):
        assert PASSWORD not in response.content.decode()


def test_a_nats_token_is_masked_whole_on_the_endpoint_page(admin_client, settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1"]
    endpoint = factories.endpoint(
        kind="nats",
        url=f"nats://{PASSWORD}@127.0.0.1:4222",
        target={"subject": "orders.paid"},
    )

    html = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    ).content.decode()

    assert "nats://***@127.0.0.1:4222" in html
    assert PASSWORD not in html


def test_an_http_endpoint_page_shows_its_url_as_stored_and_no_target(admin_client):
    endpoint = factories.endpoint()

    html = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    ).content.decode()

    assert endpoint.url in html
    assert "none (an HTTP endpoint posts to its URL)" in html


def test_staff_set_and_clear_a_merchants_broker_hosts(admin_client, settings):
    settings.RELAY_BROKER_HOSTS = ["mq.example.com"]
    merchant = factories.merchant()

    hosts = '["mq.acme.example:5671", "*.bus.acme.example"]'
    assert (
        change_merchant(admin_client, merchant, broker_hosts=hosts).status_code == 302
    )
    merchant.refresh_from_db()
    assert merchant.broker_hosts == ["mq.acme.example:5671", "*.bus.acme.example"]
    page = admin_client.get(
        reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    ).content.decode()
    assert "mq.acme.example:5671, *.bus.acme.example (set for this merchant)" in page

    assert change_merchant(admin_client, merchant, broker_hosts="").status_code == 302
    merchant.refresh_from_db()
    assert merchant.broker_hosts is None  # the setting again
    page = admin_client.get(
        reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    ).content.decode()
    assert "mq.example.com (the RELAY_BROKER_HOSTS setting)" in page


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ('["mq.*.example"]', "a wildcard may only open the pattern"),
        ('["mq.example.com:99999"]', "not 1 to 65535"),
        ('"mq.example.com"', "A list of host or host:port patterns"),
    ],
)
def test_a_bad_broker_host_list_is_refused_beside_the_field(admin_client, typed, words):
    merchant = factories.merchant()

    response = change_merchant(admin_client, merchant, broker_hosts=typed)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["broker_hosts"]
    assert words in errors["broker_hosts"][0]
    merchant.refresh_from_db()
    assert merchant.broker_hosts is None
