"""Quotas with clear answers: endpoints per merchant and deliveries per request.

Past either, a problem+json 422 that names the limit, and nothing written.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from deliveries.models import Delivery, Event
from deliveries.services import EventInput, events_publish
from endpoints.models import Endpoint, Membership
from relayproject.lib.limits import LimitExceeded
from tests.support import factories
from tests.support.api import api_as, assert_problem, row_counts

HOOK = {"url": "http://127.0.0.1:9/hook"}


def _event(n: int, merchant: str = "acme") -> dict:
    return {"merchant": merchant, "type": "order.paid", "data": {"n": n}}


@pytest.fixture
def acme(db):
    return factories.merchant("acme")


def test_an_endpoint_past_the_merchants_own_limit_is_a_422_naming_it(acme):
    acme.max_endpoints = 3
    acme.save()
    api = api_as(acme)
    for _ in range(3):
        assert api.post("/merchants/acme/endpoints", HOOK).status_code == 201
    before = row_counts()

    body = assert_problem(api.post("/merchants/acme/endpoints", HOOK), 422, ["body"])

    assert "MAX_ENDPOINTS_PER_MERCHANT" in body["detail"]
    assert "at most 3" in body["detail"]
    assert "set by staff" in body["detail"]
    assert row_counts() == before


def test_disabled_endpoints_count_and_deleting_one_makes_room(acme):
    acme.max_endpoints = 2
    acme.save()
    api = api_as(acme)
    first = api.post("/merchants/acme/endpoints", HOOK).json()["id"]
    api.post("/merchants/acme/endpoints", HOOK)
    api.patch(f"/merchants/acme/endpoints/{first}", {"is_active": False})
    assert_problem(api.post("/merchants/acme/endpoints", HOOK), 422)

    api.delete(f"/merchants/acme/endpoints/{first}")
    assert api.post("/merchants/acme/endpoints", HOOK).status_code == 201
    assert Endpoint.objects.filter(merchant=acme).count() == 2


def test_the_default_limits_refuse_the_101st_endpoint_and_a_fan_out_past_10000(acme):
    api = api_as(None)
    for _ in range(100):
        factories.endpoint(acme)
    before = row_counts()

    body = assert_problem(api.post("/merchants/acme/endpoints", HOOK), 422, ["body"])
    assert "has 100 endpoints" in body["detail"]
    assert "at most 100: MAX_ENDPOINTS_PER_MERCHANT" in body["detail"]
    # 101 events x 100 endpoints: 10,100 deliveries, past 10,000.
    events = [_event(n) for n in range(101)]
    body = assert_problem(api.post("/events/batch", {"events": events}), 422)
    assert "10100 deliveries" in body["detail"]
    assert "MAX_DELIVERIES_PER_REQUEST is 10000" in body["detail"]
    assert row_counts() == before


@pytest.fixture
def three_endpoints(acme, settings):
    settings.MAX_DELIVERIES_PER_REQUEST = 10
    for _ in range(3):
        factories.endpoint(acme)
    factories.endpoint(acme, event_types=["invoice.*"])  # not for order.paid
    return acme


def test_a_batch_whose_fan_out_passes_the_limit_writes_nothing(three_endpoints):
    api = api_as(None)
    before = row_counts()

    response = api.post("/events/batch", {"events": [_event(n) for n in range(4)]})

    body = assert_problem(response, 422, ["body"])
    assert "MAX_DELIVERIES_PER_REQUEST is 10" in body["detail"]
    assert "12 deliveries" in body["detail"]
    assert row_counts() == before
    # 3 events x 3 subscribed endpoints: 9, within the limit.
    response = api.post("/events/batch", {"events": [_event(n) for n in range(3)]})
    assert response.status_code == 201
    assert Delivery.objects.count() == 9


def test_payload_filters_do_not_shrink_the_count(three_endpoints):
    # The limit also bounds the filters' work, so it counts before them.
    for endpoint in Endpoint.objects.all():
        endpoint.filter = {"data": {"n": {"$gt": 100}}}
        endpoint.save()
    response = api_as(None).post(
        "/events/batch", {"events": [_event(n) for n in range(4)]}
    )
    assert_problem(response, 422)
    assert not Event.objects.exists()


def test_in_process_publishing_is_bounded_too(three_endpoints):
    with pytest.raises(LimitExceeded) as refused:
        events_publish(
            merchant=three_endpoints,
            events=[EventInput("order.paid", {"n": n}) for n in range(4)],
        )
    assert refused.value.setting == "MAX_DELIVERIES_PER_REQUEST"
    assert not Event.objects.exists()


def test_the_portal_refuses_an_endpoint_past_the_limit_with_a_form_error(acme, client):
    acme.max_endpoints = 1
    acme.save()
    factories.endpoint(acme)
    owner = User.objects.create_user("owner", password="pw-for-tests-only")
    Membership.objects.create(user=owner, merchant=acme, role="owner")
    client.force_login(owner)

    response = client.post(
        reverse("portal:endpoint_create", args=["acme"]), {"url": HOOK["url"]}
    )

    assert response.status_code == 400
    errors = response.context["form"].non_field_errors()
    assert any("MAX_ENDPOINTS_PER_MERCHANT" in e for e in errors)
    assert "MAX_ENDPOINTS_PER_MERCHANT" in response.content.decode()
    assert Endpoint.objects.filter(merchant=acme).count() == 1
    listing = client.get(reverse("portal:endpoint_list", args=["acme"]))
    assert "1 of at most 1 endpoints" in listing.content.decode()


def test_the_portal_refuses_a_filter_too_deep_to_parse_beside_the_field(acme, client):
    owner = User.objects.create_user("owner", password="pw-for-tests-only")
    Membership.objects.create(user=owner, merchant=acme, role="owner")
    client.force_login(owner)
    deep = '{"data": ' + '{"a": ' * 1000 + "1" + "}" * 1001

    response = client.post(
        reverse("portal:endpoint_create", args=["acme"]),
        {"url": HOOK["url"], "filter": deep},
    )

    assert response.status_code == 400
    assert "nests at most 12 fields deep" in " ".join(
        response.context["form"].errors["filter"]
    )
    assert not Endpoint.objects.exists()
