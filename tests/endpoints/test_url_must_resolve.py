"""An endpoint's host must exist in DNS when it is saved: said plainly, in the
API and the portal alike; an unknown merchant is a 404, never a 422 about DNS."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints.models import Endpoint, Membership
from tests.support.api import assert_problem
from tests.support.portal import user_with_role

pytestmark = pytest.mark.django_db

UNRESOLVABLE = "https://hooks.nowhere.invalid/webhooks"
PLAINLY = (
    "could not resolve host 'hooks.nowhere.invalid': "
    "the host must exist in DNS when the endpoint is saved"
)


def test_the_api_says_the_host_must_exist_in_dns_when_saved(platform, merchant):
    response = platform.post(
        f"/merchants/{merchant.slug}/endpoints", {"url": UNRESOLVABLE}
    )
    assert_problem(response, 422)
    assert {"loc": ["body", "url"], "msg": PLAINLY} in response.json()["errors"]
    assert not Endpoint.objects.exists()


def test_an_unknown_merchant_is_a_404_not_a_422_about_its_url(platform):
    response = platform.post("/merchants/no-such/endpoints", {"url": UNRESOLVABLE})
    assert_problem(response, 404)


def test_the_portal_says_the_host_must_exist_in_dns_when_saved(client, merchant):
    user = user_with_role(merchant, Membership.Role.OWNER, "owner")
    client.force_login(user)
    response = client.post(
        reverse("portal:endpoint_create", args=[merchant.slug]),
        {"url": UNRESOLVABLE, "description": "orders"},
    )
    assert response.status_code == 400
    assert PLAINLY.replace("'", "&#x27;") in response.content.decode()
    assert not Endpoint.objects.exists()
