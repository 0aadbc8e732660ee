"""The staff console's endpoint page shows how the endpoint signs and its
public key; neither it nor the list ever shows the private key."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support import factories

pytestmark = pytest.mark.django_db


def test_the_endpoint_page_shows_the_scheme_and_public_key_not_the_private(
    admin_client,
):
    endpoint = factories.endpoint(signing="v1a")
    private = endpoint.signing_private_key.removeprefix("whsk_")

    page = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    )
    listing = admin_client.get(reverse("admin:endpoints_endpoint_changelist"))

    html = page.content.decode()
    assert page.status_code == 200
    assert "v1a: Ed25519, checked with the public key" in html
    assert endpoint.signing_public_key in html
    for response in (page, listing):
        assert private not in response.content.decode()
