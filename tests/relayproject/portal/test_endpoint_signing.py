"""Signing in the portal: the endpoint page names the scheme and, with v1a or
both, shows the public key; an owner changes it with the edit form's select;
no page or form ever shows the private key."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints.models import Endpoint
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.relayproject.portal.test_access import MERCHANT_ROUTES, ids, url_for


def page_of(client, endpoint) -> str:
    url = reverse("portal:endpoint_detail", args=[endpoint.merchant.slug, endpoint.pk])
    return client.get(url).content.decode()


@pytest.fixture
def signing_both(world):
    endpoint_update(endpoint=world.mine.endpoint, signing="both", now=utcnow())
    world.mine.endpoint.refresh_from_db()
    return world


def test_the_page_shows_the_scheme_and_the_public_key(client, signing_both):
    client.force_login(signing_both.viewer)

    html = page_of(client, signing_both.mine.endpoint)

    assert "both: v1 and v1a side by side" in html
    assert signing_both.mine.endpoint.signing_public_key in html
    assert reverse("api:signing_keys_list", args=["acme"]) in html


def test_a_v1_endpoint_page_shows_no_public_key(client, world):
    client.force_login(world.viewer)

    html = page_of(client, world.mine.endpoint)

    assert "v1: HMAC-SHA256 with the shared secret" in html
    assert 'id="public-key"' not in html


def test_an_owner_switches_an_endpoint_to_v1a_with_the_edit_form(client, world):
    client.force_login(world.owner)
    endpoint = world.mine.endpoint
    url = reverse("portal:endpoint_edit", args=["acme", endpoint.pk])

    response = client.post(url, {"url": endpoint.url, "signing": "v1a"})

    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint.refresh_from_db()
    assert endpoint.signing == "v1a"
    assert endpoint.signing_public_key in page_of(client, endpoint)


def test_an_edit_posted_without_the_select_keeps_the_scheme(client, signing_both):
    client.force_login(signing_both.owner)
    endpoint = signing_both.mine.endpoint
    url = reverse("portal:endpoint_edit", args=["acme", endpoint.pk])

    client.post(url, {"url": endpoint.url, "description": "changed"})

    endpoint.refresh_from_db()
    assert (endpoint.description, endpoint.signing) == ("changed", "both")


@pytest.mark.parametrize("who", ["viewer", "owner"])
@pytest.mark.parametrize("route", MERCHANT_ROUTES, ids=ids)
def test_no_portal_page_or_form_shows_the_private_key(client, signing_both, route, who):
    client.force_login(getattr(signing_both, who))
    private = Endpoint.objects.get(pk=signing_both.mine.endpoint.pk).signing_private_key

    response = client.get(url_for(route, signing_both.mine))

    assert private.removeprefix("whsk_") not in response.content.decode()
