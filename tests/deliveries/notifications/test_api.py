"""POST/GET/PATCH/DELETE /operational-endpoints and secret rotation: platform
keys only, relay.* subscriptions only, everything else like any endpoint."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint
from endpoints.selectors import live_secrets
from relayproject.lib.clock import utcnow
from tests.support.api import PROBLEM, api_as

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/ops"


@pytest.fixture
def platform():
    return api_as(None)


def test_create_list_get_patch_rotate_delete(platform):
    created = platform.post(
        "/operational-endpoints",
        {"url": URL, "event_types": ["relay.endpoint.*", "relay.delivery.dead"]},
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["merchant"] == "relay.operational"
    assert body["secret"].startswith("whsec_")
    ep = body["id"]
    listed = platform.get("/operational-endpoints").json()
    assert [item["id"] for item in listed["items"]] == [ep]
    assert platform.get(f"/operational-endpoints/{ep}").json()["url"] == URL
    patched = platform.patch(
        f"/operational-endpoints/{ep}", {"is_active": False, "description": "pager"}
    ).json()
    assert patched["is_active"] is False and patched["description"] == "pager"
    assert Endpoint.objects.get(pk=ep).disabled_by == "api:test"
    rotated = platform.post(f"/operational-endpoints/{ep}/rotate-secret")
    assert rotated.status_code == 200 and rotated.json()["secret"] != body["secret"]
    assert platform.delete(f"/operational-endpoints/{ep}").status_code == 204
    assert platform.get(f"/operational-endpoints/{ep}").status_code == 404


def test_scoped_keys_are_refused(merchant):
    scoped = api_as(merchant)
    response = scoped.post("/operational-endpoints", {"url": URL})
    assert response.status_code == 403
    assert response["Content-Type"] == PROBLEM
    assert scoped.get("/operational-endpoints").status_code == 403
    assert not Endpoint.objects.exists()


def test_only_operational_types_may_be_subscribed(platform):
    response = platform.post(
        "/operational-endpoints", {"url": URL, "event_types": ["order.paid"]}
    )
    assert response.status_code == 422
    assert response["Content-Type"] == PROBLEM
    assert response.json()["errors"][0]["loc"][-1] == "event_types"
    assert not Endpoint.objects.exists()


def test_a_merchant_endpoint_is_not_an_operational_one(platform, merchant):
    from tests.support import factories

    endpoint = factories.endpoint(merchant)
    assert platform.get(f"/operational-endpoints/{endpoint.pk}").status_code == 404
    assert platform.delete(f"/operational-endpoints/{endpoint.pk}").status_code == 404


def test_rotation_with_overlap_0_leaves_only_the_new_secret_signing(platform):
    ep = platform.post(
        "/operational-endpoints", {"url": URL, "event_types": ["relay.endpoint.*"]}
    ).json()["id"]

    rotated = platform.post(
        f"/operational-endpoints/{ep}/rotate-secret", {"overlap_seconds": 0}
    )

    assert rotated.status_code == 200
    signing = live_secrets(endpoint_ids=[ep], now=utcnow())[ep]
    assert signing == [rotated.json()["secret"]]


def test_operational_events_are_sent_not_pulled(platform):
    response = platform.post("/operational-endpoints", {"kind": "pull"})
    assert response.status_code == 422
    assert response["Content-Type"] == PROBLEM
    assert response.json()["errors"][0]["loc"][-1] == "kind"
    assert not Endpoint.objects.exists()
    ep = platform.post("/operational-endpoints", {"url": URL}).json()["id"]
    changed = platform.patch(f"/operational-endpoints/{ep}", {"kind": "pull"})
    assert changed.status_code == 422
    assert Endpoint.objects.get(pk=ep).kind == "http"
