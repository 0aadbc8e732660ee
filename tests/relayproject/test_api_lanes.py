"""Ordered lanes through the API: `ordered` on endpoints, `ordering_key` on
events (single and batch), the lane's status and the delivery's fields."""

from __future__ import annotations

import pytest

from deliveries.models import Delivery
from tests.support.api import assert_problem, row_counts

pytestmark = pytest.mark.django_db


def test_an_ordered_endpoint_takes_keyed_events_one_at_a_time(any_key, merchant):
    created = any_key.post(
        "/merchants/acme/endpoints",
        {"url": "http://127.0.0.1:9/hook", "ordered": True},
    )
    assert created.status_code == 201, created.content
    endpoint_id = created.json()["id"]
    assert created.json()["ordered"] is True

    first = any_key.post(
        "/events",
        {"merchant": "acme", "type": "order.paid", "data": {}, "ordering_key": "o1"},
    )
    batch = any_key.post(
        "/events/batch",
        {
            "events": [
                {"merchant": "acme", "type": "order.paid", "data": {"n": n}}
                | {"ordering_key": "o1"}
                for n in range(2)
            ]
        },
    )
    assert first.status_code == batch.status_code == 201, batch.content
    assert first.json()["deliveries"][0]["status"] == "pending"
    assert [e["deliveries"][0]["status"] for e in batch.json()["items"]] == [
        "waiting",
        "waiting",
    ]
    waiting_id = batch.json()["items"][0]["deliveries"][0]["id"]
    shown = any_key.get(f"/deliveries/{waiting_id}").json()
    assert (shown["status"], shown["ordering_key"], shown["out_of_order"]) == (
        "waiting",
        "o1",
        False,
    )
    assert shown["held"]["reason"] == "in_lane"
    event = any_key.get(f"/events/{first.json()['id']}").json()
    assert event["ordering_key"] == "o1"
    listed = any_key.get(f"/deliveries?status=waiting&endpoint_id={endpoint_id}")
    assert len(listed.json()["items"]) == 2

    patched = any_key.patch(
        f"/merchants/acme/endpoints/{endpoint_id}", {"ordered": False}
    )
    assert patched.json()["ordered"] is False
    any_key.post(
        "/events",
        {"merchant": "acme", "type": "order.paid", "data": {}, "ordering_key": "o1"},
    )
    assert Delivery.objects.filter(status="pending").count() == 2  # unordered now


def test_a_replay_of_a_waiting_row_is_refused(any_key, merchant):
    any_key.post(
        "/merchants/acme/endpoints", {"url": "http://127.0.0.1:9/hook", "ordered": True}
    )
    for _ in range(2):
        any_key.post(
            "/events",
            {"merchant": "acme", "type": "a.b", "data": {}, "ordering_key": "k"},
        )
    waiting = Delivery.objects.get(status="waiting")
    assert_problem(any_key.post(f"/deliveries/{waiting.pk}/replay"), 409)


@pytest.mark.parametrize(
    "key", ["x" * 256, "nul\u0000inside", 7], ids=["too-long", "nul", "not-a-string"]
)
def test_a_bad_ordering_key_is_refused_and_writes_nothing(platform, merchant, key):
    before = row_counts()
    single = platform.post(
        "/events", {"merchant": "acme", "type": "a.b", "data": {}, "ordering_key": key}
    )
    batch = platform.post(
        "/events/batch",
        {
            "events": [
                {"merchant": "acme", "type": "a.b", "data": {}, "ordering_key": key}
            ]
        },
    )
    assert_problem(single, 422)
    assert_problem(batch, 422)
    assert row_counts() == before


def test_any_text_is_a_key_and_is_stored_as_sent(platform, merchant):
    platform.post(
        "/merchants/acme/endpoints", {"url": "http://127.0.0.1:9/hook", "ordered": True}
    )
    keys = ["a,b", 'q"uote', "{ü,ñ}", "back\\slash", " spaced ", "NULL", ""]
    response = platform.post(
        "/events/batch",
        {
            "events": [
                {"merchant": "acme", "type": "a.b", "data": {}, "ordering_key": k}
                for k in keys
            ]
        },
    )
    assert response.status_code == 201, response.content
    stored = sorted(
        (d.event.ordering_key, d.ordering_key, d.status)
        for d in Delivery.objects.select_related("event")
    )
    assert stored == sorted((k, k, "pending") for k in keys)
