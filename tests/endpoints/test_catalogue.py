"""The event-type catalogue over the API, and schema validation at ingest."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from deliveries.publish.validation import EventsRefused
from deliveries.services import event_publish
from endpoints.catalogue import event_type_create
from endpoints.models import EventType
from tests.support import factories
from tests.support.api import assert_problem, row_counts

ORDER_SCHEMA = {
    "type": "object",
    "required": ["order_id", "amount"],
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "integer", "minimum": 0},
        "lines": {"type": "array", "items": {"type": "object", "required": ["sku"]}},
    },
}
ORDER = {"order_id": "o-1", "amount": 120, "lines": [{"sku": "A"}]}


@pytest.fixture
def order_type(platform):
    response = platform.post(
        "/event-types",
        {
            "name": "order.created",
            "description": "An order was placed.",
            "schema": ORDER_SCHEMA,
            "example": ORDER,
        },
    )
    assert response.status_code == 201, response.content
    return response.json()


OPERATIONAL = [
    "relay.delivery.dead",
    "relay.endpoint.certificate_expiring",
    "relay.endpoint.disabled",
    "relay.endpoint.enabled",
    "relay.endpoint.failing",
    "relay.endpoint.verification",
]


def publish(api, data, type="order.created"):
    return api.post("/events", {"merchant": "acme", "type": type, "data": data})


def test_a_type_is_created_read_listed_changed_and_deleted(platform, order_type):
    assert order_type["schema"] == ORDER_SCHEMA and order_type["example"] == ORDER
    assert platform.get("/event-types/order.created").json()["deprecated"] is False
    assert [t["name"] for t in platform.get("/event-types").json()["items"]] == [
        "order.created",
        *OPERATIONAL,  # the relay's own, always there
    ]
    changed = platform.patch("/event-types/order.created", {"deprecated": True})
    assert changed.json()["deprecated"] is True
    assert changed.json()["schema"] == ORDER_SCHEMA  # untouched
    assert platform.delete("/event-types/order.created").status_code == 204
    assert_problem(platform.get("/event-types/order.created"), 404)


def test_scoped_keys_read_the_catalogue_but_cannot_change_it(
    scoped, platform, order_type
):
    assert scoped.get("/event-types/order.created").status_code == 200
    before = row_counts()
    assert_problem(scoped.post("/event-types", {"name": "x.y"}), 403)
    assert_problem(
        scoped.patch("/event-types/order.created", {"description": "d"}), 403
    )
    assert_problem(scoped.delete("/event-types/order.created"), 403)
    assert row_counts() == before


@pytest.mark.parametrize(
    ("body", "loc", "words"),
    [
        ({"name": "bad name"}, ["body", "name"], ""),
        ({"name": "order.paid\n"}, ["body", "name"], ""),
        ({"name": "a.b", "schema": {"type": "nope"}}, ["body", "schema"], "type"),
        (
            {"name": "a.b", "schema": ORDER_SCHEMA, "example": {"order_id": 5}},
            ["body", "example"],
            "order_id",
        ),
    ],
)
def test_bad_types_are_refused_naming_the_field(platform, body, loc, words):
    before = row_counts()
    problem = assert_problem(platform.post("/event-types", body), 422, loc)
    assert words in " ".join(e["msg"] for e in problem["errors"])
    assert row_counts() == before


def test_the_catalogue_refuses_a_name_with_a_trailing_line_break_in_process(db):
    with pytest.raises(ValidationError) as refused:
        event_type_create(name="order.paid\n")
    assert list(refused.value.message_dict) == ["name"]
    assert not EventType.objects.filter(name__startswith="order.paid").exists()


def test_the_api_refuses_an_event_type_with_a_trailing_line_break(platform, merchant):
    before = row_counts()
    assert_problem(publish(platform, {}, type="order.paid\n"), 422, ["body", "type"])
    assert row_counts() == before


def test_a_second_type_of_the_same_name_is_refused(platform, order_type):
    assert_problem(
        platform.post("/event-types", {"name": "order.created"}), 422, ["body", "name"]
    )


def test_data_matching_the_schema_is_accepted(any_key, order_type):
    assert publish(any_key, ORDER).status_code == 201


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"order_id": "o-1"}, ["body", "data"]),  # amount missing: at the top
        ({"order_id": "o-1", "amount": -1}, ["body", "data", "amount"]),
        ({**ORDER, "lines": [{"sku": "A"}, {}]}, ["body", "data", "lines", 1]),
        ({**ORDER, "order_id": 7}, ["body", "data", "order_id"]),
    ],
)
def test_data_failing_the_schema_is_422_naming_the_path(any_key, order_type, data, loc):
    before = row_counts()
    problem = assert_problem(publish(any_key, data), 422, loc)
    assert problem["errors"]
    assert row_counts() == before


def test_idempotent_publish_checks_the_schema_too(platform, merchant, order_type):
    response = platform.post(
        "/events",
        {"merchant": "acme", "type": "order.created", "data": {"amount": 1}},
        headers={"Idempotency-Key": "k1"},
    )
    assert_problem(response, 422, ["body", "data"])
    ok = platform.post(
        "/events",
        {"merchant": "acme", "type": "order.created", "data": ORDER},
        headers={"Idempotency-Key": "k1"},
    )
    assert ok.status_code == 201


def test_a_type_without_a_schema_accepts_anything(platform, merchant):
    platform.post("/event-types", {"name": "note.added"})
    assert (
        publish(platform, {"anything": [1, "two"]}, type="note.added").status_code
        == 201
    )
    assert publish(platform, {"x": 1}, type="not.in.catalogue").status_code == 201


def test_a_batch_names_each_failing_item_and_stores_none(
    platform, merchant, other_merchant, order_type
):
    before = row_counts()
    response = platform.post(
        "/events/batch",
        {
            "events": [
                {"merchant": "acme", "type": "order.created", "data": ORDER},
                {"merchant": "globex", "type": "other.thing", "data": {}},
                {
                    "merchant": "globex",
                    "type": "order.created",
                    "data": {**ORDER, "amount": "1"},
                },
                {
                    "merchant": "acme",
                    "type": "order.created",
                    "data": {"order_id": "x"},
                },
            ]
        },
    )
    problem = assert_problem(response, 422)
    locs = [e["loc"] for e in problem["errors"]]
    assert ["body", "events", 2, "data", "amount"] in locs
    assert ["body", "events", 3, "data"] in locs
    assert not [loc for loc in locs if loc[2] in (0, 1)]
    assert row_counts() == before


def test_in_process_publish_checks_the_schema(db):
    merchant = factories.merchant("acme")
    EventType.objects.create(name="order.created", schema=ORDER_SCHEMA)
    with pytest.raises(EventsRefused) as caught:
        event_publish(merchant=merchant, type="order.created", data={"amount": -5})
    assert {tuple(loc) for _, loc, _ in caught.value.errors} == {
        ("data",),
        ("data", "amount"),
    }
    assert event_publish(merchant=merchant, type="order.created", data=ORDER)


def test_a_changed_schema_is_used_at_once(platform, merchant, order_type):
    assert publish(platform, {"free": "form"}).status_code == 422
    platform.patch("/event-types/order.created", {"schema": None, "example": None})
    assert publish(platform, {"free": "form"}).status_code == 201


def test_the_operational_types_are_listed_with_schema_and_example(platform):
    listed = {t["name"]: t for t in platform.get("/event-types").json()["items"]}
    for name in OPERATIONAL:
        assert listed[name]["description"]
        assert listed[name]["schema"]["required"][:2] == ["merchant", "endpoint"]
        assert listed[name]["example"]["endpoint"]["url"].startswith("https://")


@pytest.mark.parametrize("name", ["relay.endpoint.failing", "relay.custom"])
def test_relay_types_cannot_be_added_changed_or_deleted(platform, name):
    before = row_counts()
    refused = platform.post("/event-types", {"name": name})
    assert_problem(refused, 422)
    assert "relay.* event types are the relay's own" in refused.content.decode()
    if name == "relay.endpoint.failing":
        assert_problem(platform.patch(f"/event-types/{name}", {"schema": None}), 422)
        assert_problem(platform.delete(f"/event-types/{name}"), 422)
        assert platform.get(f"/event-types/{name}").json()["schema"] is not None
    assert row_counts() == before
