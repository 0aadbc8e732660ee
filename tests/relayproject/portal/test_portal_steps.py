"""Recover presets, and a bulk replay confirmation that restates its filter
and warns while the endpoint still fails."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints.models import EndpointHealth

pytestmark = pytest.mark.django_db


def url(name, side, *extra):
    return reverse(f"portal:{name}", args=[side.merchant.slug, *extra])


def test_recover_offers_presets_that_count_at_once(client, world):
    client.force_login(world.owner)
    page = client.get(url("endpoint_recover", world.mine, world.mine.endpoint.pk))
    html = page.content.decode()
    for label in ("Last hour", "Last 24 hours", "Last 7 days"):
        assert f">{label}</button>" in html
    since = page.context["presets"][0][1]  # the last hour
    html = client.post(
        url("endpoint_recover", world.mine, world.mine.endpoint.pk), {"since": since}
    ).content.decode()
    assert "<strong>1</strong> dead delivery since" in html


@pytest.mark.parametrize(("paused", "warned"), [(False, False), (True, True)])
def test_bulk_confirm_restates_the_filter_and_warns_while_failing(
    client, world, paused, warned
):
    if paused:
        EndpointHealth.objects.filter(pk=world.mine.endpoint.pk).update(
            breaker_state="open"
        )
    client.force_login(world.owner)
    html = client.post(
        url("deliveries_bulk_replay", world.mine),
        {"status": "dead", "event_type": "order.*"},
    ).content.decode()
    assert 'id="bulk-filter">Filter: event type order.*.' in html
    assert ('id="bulk-warning"' in html) is warned


def test_a_new_endpoint_can_point_at_the_built_in_test_receiver(
    client, world, settings
):
    settings.RELAY_DEMO = True
    settings.RELAY_BASE_URL = "http://127.0.0.1:8100"
    client.force_login(world.owner)
    create = reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    assert 'id="id_test_receiver"' in client.get(create).content.decode()

    # A choice inside the one form: what else was typed is kept.
    response = client.post(
        create,
        {"test_receiver": "on", "description": "orders", "event_types": "order.*"},
    )

    endpoint = world.mine.merchant.endpoints.get(description="orders")
    assert endpoint.url == f"http://127.0.0.1:8100/demo/receiver/{endpoint.pk}/"
    assert endpoint.event_types == ["order.*"]
    assert response["Location"] == url("endpoint_detail", world.mine, endpoint.pk)


def test_without_the_test_receiver_a_url_is_asked_for(client, world, settings):
    settings.RELAY_DEMO = True
    client.force_login(world.owner)
    create = reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    response = client.post(create, {"description": "orders"})
    assert response.status_code == 400
    assert "or tick the built-in test receiver" in response.content.decode()
    assert not world.mine.merchant.endpoints.filter(description="orders").exists()


def test_without_the_demo_there_is_no_test_receiver_to_offer(client, world, settings):
    settings.RELAY_DEMO = False
    settings.DEBUG = False
    client.force_login(world.owner)
    slug = world.mine.merchant.slug
    page = client.get(reverse("portal:endpoint_create", args=[slug]))
    assert 'id="id_test_receiver"' not in page.content.decode()
    response = client.post(reverse("portal:endpoint_create_test", args=[slug]))
    assert response.status_code == 404
    assert not world.mine.merchant.endpoints.filter(url__contains="/demo/").exists()


def test_the_catalogue_is_searchable_and_sends_an_example(client, world):
    from endpoints.catalogue import event_type_create

    event_type_create(name="order.created", description="An order was placed")
    event_type_create(name="refund.sent", description="Money went back")
    client.force_login(world.owner)
    base = reverse("portal:catalogue", args=[world.mine.merchant.slug])

    html = client.get(base, {"q": "money"}).content.decode()
    assert 'id="type-refund.sent"' in html and 'id="type-order.created"' not in html
    example = url("endpoint_example", world.mine, world.mine.endpoint.pk)
    assert f'href="{example}?type=refund.sent"' in html
    none = client.get(base, {"q": "nothing-like-it"}).content.decode()
    assert "No event type matches" in none
    assert "The catalogue is empty" not in none


def test_viewers_search_the_catalogue_but_are_offered_no_send(client, world):
    from endpoints.catalogue import event_type_create

    event_type_create(name="order.created")
    client.force_login(world.viewer)
    html = client.get(
        reverse("portal:catalogue", args=[world.mine.merchant.slug])
    ).content.decode()
    assert 'id="type-order.created"' in html
    assert "Send its example" not in html
