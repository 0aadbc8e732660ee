"""Endpoint payload filters and custom headers over the API, through to a receiver."""

from __future__ import annotations

import logging

import pytest
from django.core.management import call_command

from deliveries.models import Delivery
from tests.support.api import assert_problem, row_counts

AMOUNT_OVER_100 = {"data": {"amount": {"$gt": 100}}}


def endpoint(api, **fields):
    response = api.post(
        "/merchants/acme/endpoints", {"url": "http://127.0.0.1:9/hook", **fields}
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_a_filter_is_stored_returned_and_cleared_with_null(any_key):
    created = endpoint(any_key, filter=AMOUNT_OVER_100)
    assert created["filter"] == AMOUNT_OVER_100
    path = f"/merchants/acme/endpoints/{created['id']}"
    assert any_key.get(path).json()["filter"] == AMOUNT_OVER_100
    assert any_key.patch(path, {"filter": None}).json()["filter"] is None


def test_fan_out_writes_no_row_for_a_filtered_out_endpoint(platform, merchant):
    big = endpoint(platform, filter=AMOUNT_OVER_100)
    every = endpoint(platform)
    small = platform.post(
        "/events", {"merchant": "acme", "type": "order.paid", "data": {"amount": 5}}
    ).json()
    large = platform.post(
        "/events", {"merchant": "acme", "type": "order.paid", "data": {"amount": 500}}
    ).json()
    assert [d["endpoint_id"] for d in small["deliveries"]] == [every["id"]]
    assert {d["endpoint_id"] for d in large["deliveries"]} == {big["id"], every["id"]}
    assert not Delivery.objects.filter(event_id=small["id"], endpoint_id=big["id"])


def test_filters_apply_to_each_event_of_a_batch(platform, merchant):
    big = endpoint(platform, filter=AMOUNT_OVER_100)
    items = platform.post(
        "/events/batch",
        {
            "events": [
                {"merchant": "acme", "type": "order.paid", "data": {"amount": n}}
                for n in (5, 500, "lots")
            ]
        },
    ).json()["items"]
    assert [len(i["deliveries"]) for i in items] == [0, 1, 0]
    assert items[1]["deliveries"][0]["endpoint_id"] == big["id"]


@pytest.mark.parametrize(
    ("fields", "loc", "words"),
    [
        ({"filter": {"data": {"amount": {"$gt": "100"}}}}, ["body", "filter"], "$gt"),
        ({"filter": {"tenant": "x"}}, ["body", "filter"], "tenant"),
        (
            {"filter": {"$or": [{"data": {f"k{i}": {"$gte": i}}} for i in range(40)]}},
            ["body", "filter"],
            "steps to check against each event",
        ),
        ({"headers": {"webhook-id": "x"}}, ["body", "headers"], "reserved"),
        ({"headers": {"X-Relay-Attempt": "9"}}, ["body", "headers"], "reserved"),
        ({"headers": {"bad name": "x"}}, ["body", "headers"], "not a header name"),
        ({"headers": {"X-A": 1}}, ["body", "headers", "X-A"], ""),
    ],
)
def test_bad_filters_and_headers_are_422_naming_the_field(
    platform, merchant, fields, loc, words
):
    before = row_counts()
    response = platform.post(
        "/merchants/acme/endpoints", {"url": "http://127.0.0.1:9/hook", **fields}
    )
    body = assert_problem(response, 422, loc)
    assert words in " ".join(e["msg"] for e in body["errors"])
    assert row_counts() == before


def test_a_bad_patch_changes_nothing(platform, merchant):
    created = endpoint(platform, headers={"X-Tenant": "t1"})
    path = f"/merchants/acme/endpoints/{created['id']}"
    response = platform.patch(
        path, {"description": "new", "headers": {"Host": "evil.example"}}
    )
    assert_problem(response, 422, ["body", "headers"])
    shown = platform.get(path).json()
    assert shown["description"] == "" and shown["headers"] == {"X-Tenant": "t1"}


def test_custom_headers_arrive_at_a_real_receiver_and_are_never_logged(
    platform, merchant, receiver, caplog
):
    token = "Bearer tok-7f3a9c-never-in-logs"
    created = platform.post(
        "/merchants/acme/endpoints",
        {"url": receiver.url, "headers": {"Authorization": token, "X-Tenant": "t1"}},
    ).json()
    platform.post("/events", {"merchant": "acme", "type": "a.b", "data": {}})
    with caplog.at_level(logging.DEBUG):
        call_command("run_dispatcher", "--drain")
    got = receiver.wait_for(1)[0]
    assert got.headers["Authorization"] == token
    assert got.headers["X-Tenant"] == "t1"
    # The relay's own headers are still its own.
    assert got.headers["webhook-id"] and got.headers["Content-Type"] == (
        "application/json"
    )
    assert created["headers"] == {"Authorization": token, "X-Tenant": "t1"}
    assert "tok-7f3a9c" not in caplog.text
