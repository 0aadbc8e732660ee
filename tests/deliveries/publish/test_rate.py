"""The publish rate per merchant: a 429 with Retry-After past it, nothing written."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from deliveries.models import Delivery, Event, PublishBucket
from deliveries.publish.rate import publish_rate_take
from endpoints.models import EventType, Membership, Merchant
from relayproject.lib.limits import LimitExceeded
from tests.support import factories
from tests.support.api import api_as, assert_problem

pytestmark = pytest.mark.both_backends


def _event(merchant: str = "acme", n: int = 0) -> dict:
    return {"merchant": merchant, "type": "order.paid", "data": {"n": n}}


def _limited(slug: str, *, rate: float, burst: int) -> Merchant:
    merchant = factories.merchant(slug)
    merchant.publish_rate_per_second = rate
    merchant.publish_burst = burst
    merchant.save()
    factories.endpoint(merchant)
    return merchant


@pytest.fixture
def acme(db):
    # One token in 100 s: nothing refills during a test.
    return _limited("acme", rate=0.01, burst=4)


def test_past_the_rate_a_publish_is_a_429_with_retry_after(acme):
    api = api_as(acme)
    assert api.post("/events/batch", {"events": [_event()] * 3}).status_code == 201
    assert api.post("/events", _event()).status_code == 201  # the 4th token

    response = api.post("/events", _event())

    body = assert_problem(response, 429, ["body"])
    assert "PUBLISH_RATE_PER_MERCHANT" not in body["detail"]  # its own rate
    assert "0.01 events per second, 4 at once" in body["detail"]
    assert 99 <= int(response["Retry-After"]) <= 100
    # Nothing half-written: no event, no delivery of the refused one.
    assert Event.objects.count() == Delivery.objects.count() == 4


def test_a_batch_counts_its_events(acme):
    api = api_as(acme)
    assert api.post("/events", _event()).status_code == 201
    response = api.post("/events/batch", {"events": [_event()] * 4})
    assert_problem(response, 429)
    # 3 tokens left: the refused batch of 4 took none of them.
    assert api.post("/events/batch", {"events": [_event()] * 3}).status_code == 201
    assert Event.objects.count() == 4


def test_more_events_than_the_burst_is_a_422_not_a_429(acme):
    response = api_as(acme).post("/events/batch", {"events": [_event()] * 5})
    body = assert_problem(response, 422, ["body"])
    assert "at most 4 at once" in body["detail"]
    assert "Retry-After" not in response
    assert not Event.objects.exists()
    assert not PublishBucket.objects.exists()


def test_the_default_rate_names_its_settings(db, settings):
    settings.PUBLISH_RATE_PER_MERCHANT = 0.01
    settings.PUBLISH_BURST_PER_MERCHANT = 1
    factories.endpoint(factories.merchant("acme"))
    api = api_as(None)
    assert api.post("/events", _event()).status_code == 201
    body = assert_problem(api.post("/events", _event()), 429)
    assert "PUBLISH_RATE_PER_MERCHANT and PUBLISH_BURST_PER_MERCHANT" in body["detail"]


def test_zero_turns_the_limit_off(db, settings):
    settings.PUBLISH_RATE_PER_MERCHANT = 0
    factories.endpoint(factories.merchant("acme"))
    api = api_as(None)
    for _ in range(3):
        assert api.post("/events", _event()).status_code == 201
    assert not PublishBucket.objects.exists()


def test_a_refused_merchant_in_a_batch_refuses_all_and_costs_the_others_nothing(acme):
    globex = _limited("globex", rate=0.01, burst=10)
    api = api_as(None)
    assert api.post("/events/batch", {"events": [_event()] * 4}).status_code == 201

    mixed = [_event("globex", 1), _event("acme", 2), _event("globex", 3)]
    assert_problem(api.post("/events/batch", {"events": mixed}), 429)

    assert Event.objects.count() == 4
    # Globex's bucket is full: what the refused batch took from it (PostgreSQL
    # takes in one statement, then gives back) is there again.
    assert not PublishBucket.objects.filter(merchant=globex, tokens__lt=9.99).exists()
    globex_events = [_event("globex", n) for n in range(10)]
    assert api.post("/events/batch", {"events": globex_events}).status_code == 201


def test_an_idempotent_publish_is_limited_too(acme):
    api = api_as(acme)
    for n in range(4):
        headers = {"Idempotency-Key": f"k{n}"}
        assert api.post("/events", _event(n=n), headers=headers).status_code == 201
    response = api.post("/events", _event(n=9), headers={"Idempotency-Key": "k9"})
    assert_problem(response, 429)
    assert Event.objects.count() == 4


def test_the_bucket_refills_at_the_rate(db):
    merchant = _limited("acme", rate=2, burst=4)
    costs = {merchant.pk: (merchant, 4)}
    publish_rate_take(costs=costs, now=1000.0)
    with pytest.raises(LimitExceeded) as refused:
        publish_rate_take(costs={merchant.pk: (merchant, 1)}, now=1000.0)
    assert refused.value.retry_after == pytest.approx(0.5)
    publish_rate_take(costs={merchant.pk: (merchant, 1)}, now=1000.5)
    # Never past the burst, however long it was quiet.
    publish_rate_take(costs=costs, now=5000.0)
    with pytest.raises(LimitExceeded):
        publish_rate_take(costs={merchant.pk: (merchant, 1)}, now=5000.0)


def test_a_lowered_limit_applies_to_a_stale_merchant_at_once(db):
    """The merchant a publish holds may be a cached copy from before staff
    lowered its limit: the take reads the rate and burst from the row."""
    stale = _limited("acme", rate=100, burst=100)
    Merchant.objects.filter(pk=stale.pk).update(
        publish_rate_per_second=0.01, publish_burst=2
    )
    with pytest.raises(LimitExceeded) as over:
        publish_rate_take(costs={stale.pk: (stale, 3)}, now=1000.0)
    assert over.value.setting == "PUBLISH_BURST_PER_MERCHANT"
    assert "at most 2 at once" in over.value.detail
    assert not PublishBucket.objects.exists()  # refused whole: nothing taken
    publish_rate_take(costs={stale.pk: (stale, 2)}, now=1000.0)
    with pytest.raises(LimitExceeded) as refused:
        publish_rate_take(costs={stale.pk: (stale, 1)}, now=1000.0)
    assert refused.value.setting == "PUBLISH_RATE_PER_MERCHANT"
    assert refused.value.retry_after == pytest.approx(100)


def test_a_raised_limit_applies_to_a_stale_merchant_at_once(db, settings):
    stale = _limited("acme", rate=0.01, burst=1)
    Merchant.objects.filter(pk=stale.pk).update(publish_burst=10)
    publish_rate_take(costs={stale.pk: (stale, 10)}, now=1000.0)
    # Back to the settings, which the stale copy does not know either.
    settings.PUBLISH_RATE_PER_MERCHANT = 0
    Merchant.objects.filter(pk=stale.pk).update(
        publish_rate_per_second=None, publish_burst=None
    )
    publish_rate_take(costs={stale.pk: (stale, 50)}, now=1000.0)


def test_the_portal_example_past_the_rate_is_a_form_error(acme, client):
    owner = User.objects.create_user("owner", password="pw-for-tests-only")
    Membership.objects.create(user=owner, merchant=acme, role="owner")
    client.force_login(owner)
    EventType.objects.create(name="order.created", example={"n": 1})
    api_as(acme).post("/events/batch", {"events": [_event()] * 4})  # all 4 tokens
    endpoint = acme.endpoints.get()

    response = client.post(
        reverse("portal:endpoint_example", args=["acme", endpoint.pk]),
        {"event_type": "order.created", "data": '{"n": 2}'},
    )

    assert response.status_code == 400
    assert "0.01 events per second" in " ".join(
        response.context["form"].non_field_errors()
    )
    assert Event.objects.count() == 4
